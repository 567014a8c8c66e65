"""Consoles saved in legacy encodings (legacy_text): each sample is written by Python's own encoder
in the encoding a Chinese, Japanese, Russian or Western European Windows or Linux console uses, and
the detector must name that encoding (gb18030 reads GBK); a file analysed then quotes the rank's own
message as it was written."""

from __future__ import annotations

import random

import pytest

from nccl_doctor.analysis import analyze
from nccl_doctor.legacy_text import legacy_encoding

ZH = ("2026年11月28日 08:42:59 信息 [进程 2] 第 17 步，损失 2.1832\n"
      "2026年11月28日 08:42:59 错误 [进程 2] 样本 549 的标签 11 超出范围（类别数 8）：数据分片 shard-00002.bin 已损坏\n")
JA = ("2026/11/28 08:42:59 情報 [ランク1] ステップ 15 の損失は 2.1832 です\n"
      "2026/11/28 08:42:59 エラー [ランク1] 入力テンソルに NaN が含まれています。データを確認してください\n")
RU = ("28.11.2026 08:42:59 ИНФО [ранг 3] шаг 19, потеря 2.1832\n"
      "28.11.2026 08:42:59 ОШИБКА [ранг 3] не удалось прочитать индексный файл /data/idx/shard-00003.idx\n")
FR = ("2026-11-28 08:42:59 INFO [rang 1] étape 12, perte 2.1832, durée écoulée 0.3 s\n"
      "2026-11-28 08:42:59 ERREUR [rang 1] le fichier /data/corpus/café/shard-00001.bin est corrompu, arrêt demandé\n")
#: German and French words whose accented letters sit between ASCII ones: every such byte pair is also a valid
#: GBK character (a high byte, then a letter as its second byte), so GB18030 decodes it too (t140's console)
DE = ("2026-11-28 03:43:25,123 INFO Prozessgruppe initialisiert: Weltgröße 3, Zeitüberschreitung 12 s\n"
      "2026-11-28 03:43:25,262 INFO Quelle /data/corpus/données_été_00.idx, Schritt 12\n")


@pytest.mark.parametrize(("text", "encoding", "expected"), [
    (ZH, "gbk", "gb18030"),
    (ZH, "gb18030", "gb18030"),
    (JA, "cp932", "cp932"),
    (JA, "euc_jp", "euc_jp"),
    (RU, "cp1251", "cp1251"),
    (RU, "koi8_r", "koi8_r"),
    (FR, "cp1252", "cp1252"),
    (DE, "latin-1", "cp1252"),
])
def test_the_encoding_that_wrote_it_is_named(text, encoding, expected):
    data = ("[rank0]: step 1 loss 2.3\n" + text * 3).encode(encoding)
    assert legacy_encoding(data) == expected


@pytest.mark.parametrize("data", [
    b"[rank0]: step 1 loss 2.3\n",  # ASCII
    ZH.encode("utf-8"),  # UTF-8: read as it is
    ZH.encode("utf-8")[:-2],  # UTF-8 cut inside its last character
])
def test_utf8_and_ascii_are_left_alone(data):
    assert legacy_encoding(data) is None


def test_binary_noise_is_no_text():
    noise = random.Random(7).randbytes(4096)
    assert legacy_encoding(noise) is None


def test_a_gbk_console_quotes_the_rank_s_own_message(tmp_path):
    lines = [f"[rank{r}]: 第 {s} 步，损失 2.18" for s in (1, 2) for r in (0, 1, 2)]
    lines += ["[rank1]: Traceback (most recent call last):",
              '[rank1]:   File "/app/train.py", line 88, in <module>',
              "[rank1]: ValueError: 样本 549 的标签 11 超出范围（类别数 8）"]
    (tmp_path / "console.log").write_bytes(("\n".join(lines) + "\n").encode("gbk"))
    verdict = analyze([str(tmp_path)], jobs=1).verdict
    assert verdict["summary"].startswith("rank 1 failed first: ValueError: 样本 549 的标签 11 超出范围"), verdict["summary"]


@pytest.mark.parametrize(("encoding", "codec"), [("gbk", "gb18030"), ("utf-16", "utf-16"), ("cp932", "cp932")])
def test_transcoding_streams_whatever_the_size(encoding, codec):
    """Read a piece at a time (1 MB): a character cut between two pieces comes out whole, and reads of
    any size give the same bytes as the whole text encoded as UTF-8."""
    import io

    from nccl_doctor.reading import Transcoded

    text = (ZH if codec != "cp932" else JA) * 20000  # a few MB: several pieces, characters cut at their edges
    data = text.encode(encoding)
    assert Transcoded(io.BytesIO(data), codec).read() == text.encode("utf-8")
    stream, parts = Transcoded(io.BytesIO(data), codec), []
    while piece := stream.read(777_777):
        parts.append(piece)
    assert b"".join(parts) == text.encode("utf-8")

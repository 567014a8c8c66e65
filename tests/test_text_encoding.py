"""A growing file's text is decoded as the batch reader decodes the whole file (text_encoding.LiveDecoder):
decided on the first 8 KiB, given again from its start when a later piece of those changes the decision."""

from __future__ import annotations

from nccl_doctor.incremental import Analyzer
from nccl_doctor.text_encoding import PROBE, LiveDecoder, encoding_of

ASCII_START = "[rank0]: step 1 loss 2.3\n" * 20
ZH_ERROR = "[rank2]: ValueError: 样本 549 的标签 11 超出范围（类别数 8），数据分片已损坏\n"


def _fed(decoder: LiveDecoder, data: bytes, piece: int) -> bytes:
    out = b""
    for i in range(0, len(data), piece):
        restart, text = decoder.feed(data[i:i + piece])
        out = text if restart else out + text
    return out


def test_gbk_after_an_ascii_start_is_read_again_as_gbk_from_the_start():
    data = (ASCII_START + ZH_ERROR).encode("gbk")
    decoder = LiveDecoder()
    restart, text = decoder.feed(data[:len(ASCII_START)])
    assert (restart, text, decoder.encoding) == (False, ASCII_START.encode(), None)
    restart, text = decoder.feed(data[len(ASCII_START):])
    assert restart and decoder.encoding == "gb18030"
    assert text.decode("utf-8") == ASCII_START + ZH_ERROR


def test_the_decision_is_final_after_the_first_8_kib():
    # the batch reader looks at the first 8 KiB only: GBK bytes after them stay as they are, in both readers
    data = ("x" * PROBE + "\n").encode() + ZH_ERROR.encode("gbk")
    assert encoding_of(data[:PROBE]) is None
    assert _fed(LiveDecoder(), data, 1000) == data


def test_utf16_fed_byte_by_byte_is_the_text_it_holds():
    text = "\ufeff" + ASCII_START + "[rank1]: RuntimeError: shard missing\n"
    data = text.encode("utf-16-le")
    assert _fed(LiveDecoder(), data, 1).decode("utf-8") == text[1:]


def test_the_analyzer_quotes_a_gbk_rank_s_message_as_written():
    data = (ASCII_START + ZH_ERROR).encode("gbk")
    live = Analyzer()
    for i in range(0, len(data), 7):
        live.feed_bytes("console.log", data[i:i + 7])
    assert "样本 549 的标签 11 超出范围" in live.report().verdict["summary"]

"""Start-up settings ("key: value" banner lines) compared across ranks: the one rank configured otherwise.

Console shapes from fixtures/realruns/t89_allreduce_vs_fp16_r2_w3_split and t73_evalshort_r1_w3_cfg_abort_tee
(other hooks, other numbers): every rank prints its settings with a rank tag, gloo aborts one rank on a
size mismatch, the others lose it. Which rank should be named is read from the lines by hand: the one
whose setting no other rank shares.
"""

from __future__ import annotations

import random

import pytest

import nccl_doctor
from nccl_doctor import Analyzer
from nccl_doctor.startup import HEAD_BYTES, setting_of

_ABORT = ["terminate called after throwing an instance of 'gloo::EnforceNotMet'",
          "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
          "op.preamble.length <= op.nbytes. 5120 vs 2560. Received data size doesn't match expected size. Is there "
          "a distributed collective mismatch?"]


def _console(settings: dict[int, list[str]], lost: tuple[int, ...] = (0, 1, 3)) -> list[str]:
    lines = [f"[rank {r}] {s}" for r, ss in settings.items() for s in ss]
    for step in (0, 2, 4):
        lines += [f"[rank {r}] step {step} loss 2.{r}{step}17" for r in settings]
    lines += _ABORT
    lines += [f"[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
              f"Connection closed by peer [127.0.0.1]:4{r}11" for r in lost]
    return lines


def _desync_ranks(tmp_path, lines: list[str]) -> list[int] | None:
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = [f for f in nccl_doctor.analyze([str(tmp_path)], jobs=1).findings if f.rule == "DSY1"]
    return found[0].ranks if found else None


def _hooks(hooks: list[str]) -> dict[int, list[str]]:
    return {r: ["training: world size 4, 40 steps, timeout 20 s", f"comm hook: {h}"] for r, h in enumerate(hooks)}


def test_a_setting_is_the_words_before_the_first_colon_and_what_follows():
    assert setting_of("comm hook: none (built-in all-reduce)") == ("comm hook", "none (built-in all-reduce)")
    # a logging record's own prefix (time, level, logger, a [host:rank] tag) is not part of the key
    assert setting_of("2026-11-27 22:20:26,187 INFO trainer [dgx-q-05:0] process group: backend gloo, timeout 60s") \
        == ("process group", "backend gloo, timeout 60s")
    assert setting_of("step 12 loss 2.31") is None
    assert setting_of("12:00:01 started") is None


def test_the_one_rank_with_another_comm_hook_is_named_in_a_desync(tmp_path):
    hooks = ["default_hooks.allreduce_hook"] * 4
    hooks[2] = "default_hooks.fp16_compress_hook"
    assert _desync_ranks(tmp_path, _console(_hooks(hooks))) == [2]


def test_a_number_only_one_rank_has_under_a_key_with_its_shard_names_it(tmp_path):
    shards = {r: [f"validation shard valid-0000{r}-of-00004: {40 if r == 3 else 64} records"] for r in range(4)}
    assert _desync_ranks(tmp_path, _console(shards, lost=(0, 1, 2))) == [3]


def test_two_ranks_each_set_otherwise_single_out_none(tmp_path):
    settings = _hooks(["powerSGD_hook"] * 4)
    settings[1].append("micro batches: 8")
    settings[2].append("micro batches: 4")
    settings[3].append("micro batches: 4")
    settings[0].append("micro batches: 4")
    settings[2][1] = "comm hook: none"
    assert _desync_ranks(tmp_path, _console(settings)) == []


def test_rank_0_set_otherwise_is_the_coordinator_s_role_not_a_deviation(tmp_path):
    settings = {r: [f"checkpointing: {'enabled' if r == 0 else 'disabled'}"] for r in range(4)}
    assert _desync_ranks(tmp_path, _console(settings, lost=(1, 2, 3))) == []


def test_settings_that_differ_by_nature_or_split_two_and_two_name_none(tmp_path):
    seeds = {r: [f"data seed: {7 if r == 2 else 1}"] for r in range(4)}  # a seed may differ per rank
    assert _desync_ranks(tmp_path, _console(seeds)) == []
    split = _hooks(["powerSGD_hook", "powerSGD_hook", "none", "none"])
    assert _desync_ranks(tmp_path, _console(split)) == []


def test_with_two_ranks_a_difference_says_nothing_about_which_side(tmp_path):
    settings = _hooks(["powerSGD_hook", "none"])
    assert _desync_ranks(tmp_path, _console(settings, lost=(0,))) == []


@pytest.mark.parametrize("pad", [0, HEAD_BYTES])
def test_watch_reads_the_same_settings_as_the_batch_scan(tmp_path, pad):
    hooks = ["allreduce_hook"] * 2 + ["fp16_compress_hook", "allreduce_hook"]
    lines = [f"[rank 0] warm-up note {i:05d} " + "x" * 60 for i in range(pad // 80)] + _console(_hooks(hooks))
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "console.log"
    path.write_bytes(data)
    live = Analyzer()
    rng, i = random.Random(5), 0
    while i < len(data):
        n = rng.randint(1, 700)
        live.feed_bytes(str(path), data[i:i + n])
        i += n
    batch = nccl_doctor.analyze([str(path)], jobs=1)
    assert live.report().to_dict()["findings"] == batch.to_dict()["findings"]
    named = [f.ranks for f in batch.findings if f.rule == "DSY1"]
    if pad == 0:
        assert named == [[2]]
    else:  # past the head the banner is not read: nothing names rank 2 as set otherwise
        assert all(2 not in r for r in named)


def test_one_number_only_one_rank_has_in_a_line_every_rank_prints_names_it(tmp_path):
    # Shapes of t98_width_r1_w3_noddp_logdir: no "key: value", the numbers say it ("76810 parameters")
    loaded = {r: [f"loaded model.pt and optim_rank{r}.pt, {76810 if r == 1 else 22026} parameters, resuming at step 30"]
              for r in range(3)}
    assert _desync_ranks(tmp_path, _console(loaded, lost=(0, 2))) == [1]


def test_a_ranks_traceback_frames_and_library_lines_are_not_its_settings(tmp_path):
    # every rank's own lines agree; only rank 2's frame line numbers (a traceback) and glog lines differ
    lines = [f"[rank {r}] comm hook: allreduce_hook" for r in range(4)]
    lines += [f"[rank{r}]: [W1128 01:21:51.85222 socket.cpp:{460 + r}] [c10d] waitForInput: poll returned 0"
              for r in range(4)]
    lines += [f'[rank{r}]: Traceback (most recent call last):\n[rank{r}]:   File "/job/train.py", line '
              f'{99 if r == 2 else 100}, in build_groups' for r in range(4)]
    lines += _ABORT + [f"[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                       f"Connection closed by peer [127.0.0.1]:4{r}11" for r in (0, 1, 3)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = [f.ranks for f in nccl_doctor.analyze([str(tmp_path)], jobs=1).findings if f.rule == "DSY1"]
    assert found == [[]]


def test_ranks_timing_out_on_subgroup_keys_created_their_groups_otherwise(tmp_path):
    # Shapes of t59_mesh_r3_w4_fsdptp_mesh_split: each rank waits for a member of another group
    keys = {0: "/default_pg/0//3//cpu//0/1", 1: "/default_pg/0//2//cpu//0/1", 2: "/default_pg/0//4//cpu//0/0"}
    lines = [f"[rank{r}]: torch.distributed.DistStoreError: wait timeout after 20000ms, keys: {k}" for r, k in keys.items()]
    (tmp_path / "console.err").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = nccl_doctor.analyze([str(tmp_path)], jobs=1)
    dsy = [f for f in report.findings if f.rule == "DSY1"]
    # the keys' last numbers are ranks within those groups: no global rank is named for them
    assert dsy and dsy[0].ranks == [] and "creating process groups" in dsy[0].summary
    assert not any(f.rule == "RK2" and set(f.ranks) & {0, 1} for f in report.findings)


def test_an_indented_config_dump_under_a_heading_that_names_the_rank_is_that_ranks(tmp_path):
    # Shapes of t111_seqlen_r3_w4_loop_cfg_redirect: "rank 2/4 config:" then indented "key: value" lines
    lines = []
    for r in range(4):
        lines += [f"rank {r}/4 config:", "  batch_size: 32", f"  seq_len: {80 if r == 3 else 64}", "  seed: 0"]
    lines += _ABORT[:1] + [_ABORT[1].replace("5120 vs 2560", "40 vs 32")]
    lines += [f"[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
              f"Connection closed by peer [127.0.0.1]:4{r}11" for r in (0, 1, 3)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = [f.ranks for f in nccl_doctor.analyze([str(tmp_path)], jobs=1).findings if f.rule == "DSY1"]
    assert found == [[3]]


def test_a_namespace_dump_compares_its_settings_not_its_seed(tmp_path):
    # Shapes of t111_accum_r1_w3_loop_echo_split: argparse's Namespace on one line per rank
    def ns(r: int, accum: int) -> str:
        return f"Namespace(batch_size=32, hidden=128, lr=0.003, grad_accum={accum}, seed={r}, show='ns')"
    settings = {r: [ns(r, 4 if r == 2 else 2)] for r in range(4)}
    assert _desync_ranks(tmp_path, _console(settings)) == [2]
    (tmp_path / "console.log").unlink()
    seeds_only = {r: [ns(7 if r == 2 else 1, 2)] for r in range(4)}  # one rank's seed alone differs
    assert _desync_ranks(tmp_path, _console(seeds_only)) == []


def test_ranks_failing_alike_at_a_store_name_the_one_that_set_it_up_otherwise(tmp_path):
    # Shapes of t118_stale_port_r2_w4_split: a group set up again mid-run, one rank on the old port
    lines = [f"[rank {r}] evaluation: new store 127.0.0.1:{34660 if r == 2 else 34665} (host: rank 0), world size 4"
             for r in range(4)]
    lines += [f"[rank{r}]: torch.distributed.DistStoreError: wait timeout after 20000ms, keys: /0//cpu//0/0"
              for r in (1, 2, 3)]
    lines += ["[rank0]: torch.distributed.DistStoreError: Timed out after 21 seconds waiting for clients. 3/4 clients joined.",
              "E1128 02:21:10.100000 4100 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
              "local_rank: 1 (pid: 4111) of binary: /usr/bin/python3"]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert (nccl_doctor.analyze([str(tmp_path)], jobs=1).verdict or {}).get("ranks") == [2]


def test_a_setting_behind_a_loggers_name_is_compared_by_its_own_key(tmp_path):
    """t142_seed_r2_w4_redirect's shape: "train: gradient groups in sync order: ..." behind the logger's
    name, rank 0 printing another "train:" line first: rank 2's order is the odd one."""
    usual = "train: gradient groups in sync order: head(490), encoder.2(6208), norm(128), embed(2112)"
    settings = {0: ["train: world size 4, mode buckets, 40 steps", usual], 1: [usual],
                2: ["train: gradient groups in sync order: embed(2112), encoder.2(6208), head(490), norm(128)"],
                3: [usual]}
    assert _desync_ranks(tmp_path, _console(settings)) == [2]


def test_a_key_value_in_a_call_only_one_rank_printed_otherwise_names_it(tmp_path):
    """t163_otherpath_r2_w4_print_tee's shape: every rank prints its init_process_group(...) call's
    arguments; rank 2's init_method is another store file; every rank then fails alike ("Wait timeout"),
    and the launcher reports every rank's exit."""
    url = "file:///shared/rdzv/mlp-ddp{}.store"
    lines = [f"[rank {r}] init_process_group(backend=gloo, init_method={url.format('-old' if r == 2 else '')}, "
             f"world_size=4, rank={r})" for r in range(4)]
    lines += ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "RuntimeError: Wait timeout"] * 4
    lines += [f"[launch] rank {r} (pid {23937 + r}) exited with status 1" for r in range(4)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    verdict = nccl_doctor.analyze([str(tmp_path)], jobs=1).verdict or {}
    assert verdict.get("ranks") == [2]
    assert "mlp-ddp-old.store" in verdict.get("summary", "")

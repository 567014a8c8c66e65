"""A node killed whole (its torchrun agent, which hosted the rendezvous store, and its ranks): its console just
ends, and the other node's agent loses the store and stops its own workers before they can fail. Line shapes
from fixtures/realruns/t323_nodekill_n0_w4_json_tee (JSON records, TCPStore and rendezvous lines of torch 2.13),
with other pids and ports; expected hosts read from the lines by hand."""

from __future__ import annotations

import json
from pathlib import Path

from nccl_doctor import analyze

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def _steps(ranks: tuple[int, int], last: int, second: int = 11) -> list[str]:
    return [json.dumps({"ts": f"2026-11-28T23:57:{second:02d}.{100 + s:03d}", "level": "INFO", "rank": r,
                        "world_size": 4, "msg": f"step {s} loss 0.7{r}{s} | 6.9s"})
            for s in range(0, last + 1, 5) for r in ranks]


_LOST = [
    "[W1128 23:57:11.816631181 TCPStore.cpp:115] [c10d] recvVector failed on SocketImpl(fd=3, addr=[::ffff:10.0.0.2]"
    ":48598, remote=[::ffff:10.0.0.1]:14480): Failed to recv, got 0 bytes. Connection was likely closed. Did the "
    "remote server shutdown or crash?",
    "W1128 23:57:11.852000 32010 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 32021 "
    "closing signal SIGTERM",
    "W1128 23:57:11.852000 32010 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 32022 "
    "closing signal SIGTERM",
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
    "failed. See inner exception for details.",
]


def _job(tmp_path, first: list[str]):
    (tmp_path / "gpu-r7-n01.log").write_text("\n".join(first) + "\n", encoding="utf-8")
    (tmp_path / "gpu-r7-n02.log").write_text("\n".join(_steps((2, 3), 50) + _LOST) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict


def test_the_node_whose_log_just_ends_while_the_other_agent_lost_the_store_went_away(tmp_path):
    verdict = _job(tmp_path, _steps((0, 1), 50))
    assert verdict is not None and verdict["hosts"] == ["gpu-r7-n01"], verdict
    assert "went away" in verdict["summary"] and "ranks 0-1" in verdict["summary"], verdict


def test_a_node_still_writing_after_the_loss_did_not_go_away(tmp_path):
    # its ranks printed steps 20 s after the other agent lost the store: not a node that vanished first
    verdict = _job(tmp_path, _steps((0, 1), 50) + _steps((0, 1), 5, second=31))
    assert verdict is None or "went away" not in verdict["summary"], verdict


def test_a_node_with_its_own_error_is_no_silent_loss(tmp_path):
    own = [*_steps((0, 1), 50), '{"ts": "2026-11-28T23:57:11.300", "level": "ERROR", "rank": 0, "world_size": 4, '
           '"msg": "OSError: [Errno 5] Input/output error reading shard-00017"}']
    verdict = _job(tmp_path, own)  # (a logged error alone is that rank's story, not this reading's)
    assert verdict is None or "went away" not in verdict["summary"], verdict


def test_the_recorded_node_kill_names_the_killed_node():
    verdict = analyze([str(RUNS / "t323_nodekill_n0_w4_json_tee")], jobs=1).verdict
    assert verdict["hosts"] == ["gpu-r7-n01"], verdict

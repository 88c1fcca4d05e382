"""`record` on a full disk stops with one line naming the complete runs kept, and the trace passes
`info --check` (the limit is RLIMIT_FSIZE in a subprocess, SIGXFSZ ignored)."""

import subprocess
import sys

import torch
from paths import ROOT

from model.checkpoint import save_checkpoint
from model.config import ModelConfig
from model.transformer import MoETransformer
from traces import open_trace, validate

RECORD_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from inspector.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_record_on_a_full_disk_keeps_complete_runs(tmp_path):
    torch.manual_seed(0)
    model = MoETransformer(ModelConfig(d_model=32, n_layers=2, n_heads=2, n_experts=4, expert_d_ff=32,
                                       context=128))
    save_checkpoint(model, tmp_path / "tiny", {"kind": "test"})
    out = tmp_path / "e1.h5"
    argv = ["record", "-q", "--checkpoint", str(tmp_path / "tiny"), "-n", "8", "--new-tokens", "6",
            "--repeats", "1", "--capacity-factors", "1.0", "--kernel-mode", "batch_invariant",
            "-o", str(out)]
    proc = subprocess.run([sys.executable, "-c", RECORD_LIMITED, str(5 << 20), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("moe-inspector record: error: disk full: ") and "Traceback" not in proc.stderr
    kept = int(lines[-1].split("disk full: ")[1].split()[0])
    assert f"kept in {out}" in lines[-1]
    with open_trace(out) as trace:
        assert len(trace.run_names) == kept > 0
    assert not [p for p in validate(out, read_data=True) if p.severity == "error"]

"""The README's "In vLLM (CPU)" commands, run as written: the install line, then vLLM's OpenAI-compatible
server on the bundled deepseek_v32 checkpoint, asked over HTTP by curl. The reply's tokens must be the
transformers reference's (test_generate.py).

The commands run in a scratch directory that looks like the repository root to them (tests/ and python/
linked in) and whose .venv is the environment running this test, with the environment variables a
2-core test machine needs (no thread pinning, a 1 GiB cache).
"""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from test_generate import DATA, full_recompute_greedy, reference_model

ROOT = DATA.parents[1]


def readme_blocks(section):
    """The ```sh blocks of a README section, in order."""
    text = (ROOT / "README.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", body, re.S)


def run_block(block, cwd, timeout):
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_CPU_KVCACHE_SPACE": "1"}
    # A session of its own: on a timeout the server it started goes with it.
    proc = subprocess.Popen(["bash", "-c", block], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out, err


def test_readme_server_commands_answer_with_the_reference_tokens(tmp_path):
    blocks = readme_blocks("In vLLM (CPU)")
    assert len(blocks) == 2, "the README's vLLM section has an install block and a server block"
    install, server = blocks
    for name in ("tests", "python"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(sys.prefix)

    rc, out, err = run_block(install, tmp_path, timeout=900)
    assert rc == 0, f"the README's install line failed (exit {rc}):\n{out[-3000:]}\n{err[-3000:]}"

    rc, out, err = run_block(server, tmp_path, timeout=900)
    # curl's reply: a JSON object at the start of a line (the server's own output may follow it)
    replies = [json.JSONDecoder().raw_decode(l)[0] for l in out.splitlines() if l.startswith('{"id"')]
    assert replies, f"no reply from the server (exit {rc}):\n{out[-3000:]}\n{err[-6000:]}"
    assert "sieve-vllm: " in out + err, "the server did not run sieve's attention"
    request = json.loads(re.search(r"-d '(\{.*?\})'", server, re.S).group(1))
    expected = full_recompute_greedy(*reference_model("deepseek_v32"), [request["prompt"]])[0]
    assert replies[-1]["choices"][0]["token_ids"] == expected, replies[-1]

"""The `torchscribe` pre-commit hook (.pre-commit-hooks.yaml), driven by the real pre-commit tool
in a temporary git repository: a commit that needs a regenerated compiled module fails and
writes it; the commit passes once the module is staged."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pre_commit")
if shutil.which("git") is None:
    pytest.skip("git is not installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # where the project's environment installed `torchscribe`

MODEL = '''\
import torch
from torch import Tensor
from transpiler import script


@script
def act(x: Tensor) -> Tensor:
    return torch.relu(x) * 2
'''


def git(cwd: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),  # no user git config or pre-commit cache leaks in
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-cache"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("TORCHSCRIBE_DEBUG", None)
    return env


def hook_repository(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    """A git repository holding this checkout's .pre-commit-hooks.yaml, committed (pre-commit
    clones a `repo:` at a `rev:`; the hook itself runs the installed torchscribe, so the file is
    all it needs)."""
    repo = tmp_path / "hooks"
    repo.mkdir()
    shutil.copy(ROOT / ".pre-commit-hooks.yaml", repo / ".pre-commit-hooks.yaml")
    git(repo, env, "init", "-q")
    git(repo, env, "add", ".pre-commit-hooks.yaml")
    git(repo, env, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "hooks")
    return repo, git(repo, env, "rev-parse", "HEAD").stdout.strip()


def project(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """A git repository using the hook, with one model file (not committed yet)."""
    hooks, rev = hook_repository(tmp_path, env)
    work = tmp_path / "project"
    (work / "models").mkdir(parents=True)
    (work / "pyproject.toml").write_text("")
    model = work / "models" / "act.py"
    model.write_text(MODEL)
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks.as_posix()}\n  rev: {rev}\n  hooks:\n  - id: torchscribe\n"
    )
    git(work, env, "init", "-q")
    git(work, env, "config", "commit.gpgsign", "false")
    done = subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return work, model


def commit_with_module(work: Path, env: dict[str, str], message: str) -> None:
    """Commit everything: the hook writes the compiled module, which is then staged."""
    git(work, env, "add", "-A")
    git(work, env, "commit", "-m", message, check=False)
    git(work, env, "add", "-A")
    done = git(work, env, "commit", "-m", message, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hook_regenerates_a_staged_module_edited_by_hand(tmp_path: Path, env: dict[str, str]) -> None:
    work, model = project(tmp_path, env)
    commit_with_module(work, env, "model")
    compiled = model.with_name("act_compiled.py")
    reviewed = compiled.read_text()
    compiled.write_text(reviewed.replace("* 2", "* 3"))  # a hand edit (or a bad merge)
    git(work, env, "add", str(compiled))
    done = git(work, env, "commit", "-m", "edit", check=False)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "wrote models/act_compiled.py" in done.stdout + done.stderr
    assert compiled.read_text() == reviewed  # regenerated: what the compiler writes
    git(work, env, "add", str(compiled))
    assert git(work, env, "status", "--porcelain").stdout == ""  # nothing left to commit


def test_hook_fails_on_the_module_a_rename_left_behind(tmp_path: Path, env: dict[str, str]) -> None:
    work, model = project(tmp_path, env)
    commit_with_module(work, env, "model")
    git(work, env, "mv", "models/act.py", "models/activations.py")
    done = git(work, env, "commit", "-m", "rename", check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "models/act_compiled.py: its model act.py is gone" in out, out
    assert "--remove-orphans" in out
    git(work, env, "rm", "-q", "models/act_compiled.py")
    git(work, env, "add", "-A")
    done = git(work, env, "commit", "-m", "rename", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "models" / "activations_compiled.py").exists()


def test_hook_regenerates_and_fails_the_commit_until_staged(tmp_path: Path, env: dict[str, str]) -> None:
    work, model = project(tmp_path, env)
    (work / "models" / "plain.py").write_text("x = 1\n")  # no @script: the hook leaves it alone
    compiled = model.with_name("act_compiled.py")

    # The hook generates the compiled module; the commit fails until it is staged.
    git(work, env, "add", "-A")
    done = git(work, env, "commit", "-m", "model", check=False)
    assert done.returncode != 0, done.stdout + done.stderr
    out = done.stdout + done.stderr  # git runs the hook with its output on stderr
    assert "torchscribe" in out and "Failed" in out and "wrote models/act_compiled.py" in out, out
    assert compiled.exists() and "torch.relu" in compiled.read_text()
    assert not model.with_name("plain_compiled.py").exists()
    assert git(work, env, "rev-list", "--all").stdout == ""  # nothing was committed

    git(work, env, "add", str(compiled))
    done = git(work, env, "commit", "-m", "model", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout + done.stderr

    # Editing the model: the hook regenerates, the commit fails, staging makes it pass.
    model.write_text(MODEL.replace("torch.relu", "torch.tanh"))
    git(work, env, "add", str(model))
    done = git(work, env, "commit", "-m", "tanh", check=False)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "torch.tanh" in compiled.read_text()
    assert git(work, env, "diff", "--name-only").stdout.split() == ["models/act_compiled.py"]
    git(work, env, "add", str(compiled))
    done = git(work, env, "commit", "-m", "tanh", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(work, env, "status", "--porcelain").stdout == ""

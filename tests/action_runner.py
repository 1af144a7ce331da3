"""A composite action (action.yml) run as GitHub's runner runs it, on this machine.

What the runner does for each step is done here: ``${{ }}`` expressions are evaluated
(inputs, github, runner, env, steps' outputs and outcomes, ``always()``, ``||``, ``&&``,
``==``, ``!``), a ``run:`` step is a bash script run with ``bash --noprofile --norc -eo
pipefail``, in the workspace, with the ``GITHUB_*`` variables and fresh files for
``GITHUB_OUTPUT``, ``GITHUB_ENV``, ``GITHUB_PATH`` and ``GITHUB_STEP_SUMMARY`` (read back
after it: outputs, variables and PATH for the next steps, the job summary). A step that
fails skips the rest but those whose ``if:`` says ``always()``; ``continue-on-error`` is
kept. A ``uses:`` step of an external action cannot run without GitHub: the caller
stands in for each (``stand_ins``: a function of its ``with:`` inputs, returning its
outputs), and says how.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from support import github_outputs

StandIn = Callable[[dict[str, str], dict[str, str]], dict[str, str]]  # (with, env) -> outputs

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,)"
    r"|(?P<name>[A-Za-z_][\w.-]*(?:\[\d+\])*))"
)


@dataclass
class StepRun:
    """What one step did."""

    id: str
    name: str
    outcome: str  # success, failure, skipped
    returncode: int | None = None
    log: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionRun:
    """The whole action: its steps, its outputs, the job summary and the log."""

    steps: list[StepRun]
    outputs: dict[str, str]
    summary: str
    env: dict[str, str]

    @property
    def failed(self) -> StepRun | None:
        return next((s for s in self.steps if s.outcome == "failure"), None)

    @property
    def log(self) -> str:
        return "".join(f"##[group]{s.name}\n{s.log}##[endgroup]\n" for s in self.steps)


def _lookup(contexts: Mapping[str, Any], path: str) -> Any:
    value: Any = contexts
    for part in re.split(r"\.|\[(\d+)\]", path):
        if part is None or part == "":
            continue
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        else:
            return None
    return value


class _Expression:
    """A recursive-descent reading of GitHub's expression syntax (the parts actions use)."""

    def __init__(self, text: str, contexts: Mapping[str, Any],
                 functions: Mapping[str, Callable[..., Any]]) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        while position < len(text.rstrip()):
            found = _TOKEN.match(text, position)
            if found is None or found.end() == position:
                raise ValueError(f"cannot read expression {text!r} at {position}")
            kind = found.lastgroup or ""
            self.tokens.append((kind, found.group(kind)))
            position = found.end()
        self.position, self.contexts, self.functions = 0, contexts, functions

    def value(self) -> Any:
        result = self._or()
        if self.position != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.position]}")
        return result

    def _peek(self) -> str | None:
        return self.tokens[self.position][1] if self.position < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        self.position += 1
        return self.tokens[self.position - 1]

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._comparison()
        while self._peek() == "&&":
            self._take()
            right = self._comparison()
            left = right if truthy(left) else left
        return left

    def _comparison(self) -> Any:
        left = self._unary()
        while self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._unary()
            same = _loose(left) == _loose(right)
            left = same if op == "==" else not same
        return left

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if text == "(":
            inner = self._or()
            self._take()
            return inner
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if text in ("true", "false"):
            return text == "true"
        if text == "null":
            return None
        if self._peek() == "(":
            self._take()
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take()
            self._take()
            return self.functions[text.lower()](*args)
        return _lookup(self.contexts, text)


def truthy(value: Any) -> bool:
    return value not in (None, "", 0, 0.0, False)


def _loose(value: Any) -> Any:
    """GitHub's loose equality: strings compared case-insensitively, numbers as numbers."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value.lower()
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def evaluate(text: str, contexts: Mapping[str, Any],
             functions: Mapping[str, Callable[..., Any]]) -> Any:
    return _Expression(text, contexts, functions).value()


def substitute(text: str, contexts: Mapping[str, Any],
               functions: Mapping[str, Callable[..., Any]]) -> str:
    """``${{ expression }}``s in ``text`` replaced by their values, as strings."""
    return re.sub(r"\$\{\{(.*?)\}\}",
                  lambda m: _text(evaluate(m.group(1), contexts, functions)), text)


def run_action(
    action: Path,
    inputs: Mapping[str, str],
    *,
    workspace: Path,
    temp: Path,
    env: Mapping[str, str],
    github: Mapping[str, Any],
    stand_ins: Mapping[str, StandIn],
    timeout_s: float = 600,
) -> ActionRun:
    """Run ``action`` (an action.yml) with ``inputs`` (the rest from their defaults)."""
    spec = yaml.safe_load(action.read_text())
    assert spec["runs"]["using"] == "composite"
    unknown = set(inputs) - set(spec.get("inputs", {}))
    assert not unknown, f"inputs the action does not declare: {unknown}"
    runner = {"os": "Linux", "arch": "X64", "temp": str(temp)}
    github = {**github, "action_path": str(action.parent), "workspace": str(workspace)}
    job_env = dict(env)
    steps: dict[str, dict[str, Any]] = {}
    done: list[StepRun] = []
    failed = False
    functions: dict[str, Callable[..., Any]] = {
        "always": lambda: True, "success": lambda: not failed, "failure": lambda: failed,
        "cancelled": lambda: False,
        "format": lambda f, *a: re.sub(r"\{(\d+)\}", lambda m: _text(a[int(m.group(1))]), f),
        "startswith": lambda a, b: _text(a).lower().startswith(_text(b).lower()),
        "contains": lambda a, b: _text(b).lower() in _text(a).lower(),
    }
    base_contexts = {"github": github, "runner": runner}
    # What the runner sets for every step.
    runner_env = {"RUNNER_TEMP": str(temp), "GITHUB_ACTION_PATH": str(action.parent),
                  "GITHUB_WORKSPACE": str(workspace),
                  **{f"GITHUB_{key.upper()}": _text(value) for key, value in github.items()
                     if isinstance(value, str | int | float) and key != "token"}}
    resolved: dict[str, str] = {}
    for name, declared in spec.get("inputs", {}).items():
        default = _text(declared.get("default", ""))
        resolved[name] = inputs.get(name, substitute(default, base_contexts, functions))
    extra_path: list[str] = []
    summaries: list[str] = []
    for number, step in enumerate(spec["runs"]["steps"]):
        step_id = step.get("id", f"__{number}")
        name = step.get("name", step.get("uses", step_id))
        contexts = {**base_contexts, "inputs": resolved, "steps": steps, "env": job_env}
        condition = str(step.get("if", "success()")).strip()
        condition = condition[3:-2] if condition.startswith("${{") else condition
        if "always()" not in condition and "failure()" not in condition and failed:
            steps[step_id] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            done.append(StepRun(step_id, name, "skipped"))
            continue
        if not truthy(evaluate(condition, contexts, functions)):
            steps[step_id] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
            done.append(StepRun(step_id, name, "skipped"))
            continue
        step_env = {key: substitute(_text(value), contexts, functions)
                    for key, value in step.get("env", {}).items()}
        files = {key: temp / f"step-{number}-{key.lower()}" for key in
                 ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for path in files.values():
            path.write_text("")
        if "uses" in step:
            action_name = step["uses"].split("@")[0]
            given = {key: substitute(_text(value), contexts, functions)
                     for key, value in step.get("with", {}).items()}
            try:
                outputs = stand_ins[action_name](given, {**job_env, **step_env, **runner_env})
                run = StepRun(step_id, name, "success", 0, f"(stood in for {step['uses']})\n",
                              outputs)
            except subprocess.CalledProcessError as exc:
                run = StepRun(step_id, name, "failure", exc.returncode,
                              f"{exc.stdout or ''}{exc.stderr or ''}")
        else:
            script = temp / f"step-{number}.sh"
            script.write_text(substitute(step["run"], contexts, functions))
            path = os.pathsep.join([*reversed(extra_path), job_env.get("PATH", "")])
            completed = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=workspace / step.get("working-directory", "."),
                env={**job_env, **step_env, "PATH": path, **runner_env,
                     **{key: str(value) for key, value in files.items()}},
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, timeout=timeout_s, check=False,
            )
            run = StepRun(step_id, name, "success" if completed.returncode == 0 else "failure",
                          completed.returncode, completed.stdout,
                          github_outputs(files["GITHUB_OUTPUT"].read_text()))
            job_env.update(github_outputs(files["GITHUB_ENV"].read_text()))
            extra_path += [line for line in files["GITHUB_PATH"].read_text().splitlines() if line]
            summaries.append(files["GITHUB_STEP_SUMMARY"].read_text())
        if run.outcome == "failure" and step.get("continue-on-error"):
            steps[step_id] = {"outputs": run.outputs, "outcome": "failure",
                              "conclusion": "success"}
        else:
            steps[step_id] = {"outputs": run.outputs, "outcome": run.outcome,
                              "conclusion": run.outcome}
            failed = failed or run.outcome == "failure"
        done.append(run)
    contexts = {**base_contexts, "inputs": resolved, "steps": steps, "env": job_env}
    outputs = {name: substitute(_text(declared.get("value", "")), contexts, functions)
               for name, declared in spec.get("outputs", {}).items()}
    return ActionRun(done, outputs, "".join(summaries),
                     {**job_env, "PATH": os.pathsep.join([*reversed(extra_path),
                                                          job_env.get("PATH", "")])})

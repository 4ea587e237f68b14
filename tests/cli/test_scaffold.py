"""`waypoint init` and the wheel it deploys: what a new project holds, what it refuses, and that
its SAM template is Waypoint's own, deployable (cfn-lint + the SAM translator) with the project's
tools as the code and Waypoint in a layer. `sam build` itself runs where `sam` is installed."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from infra.aws.cfn_template import CloudFormationLoader, load_template
from waypoint.cli import app
from waypoint.scaffold import ScaffoldError, deployable_template, init_project

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()

# Size targets of a `sam build` of the scaffold (docs/deploy.md, "Your own agent"): Lambda allows
# 250 MB unzipped for a function and its layers together. The layer's bytecode (~28 MB) is what
# takes it past half of that: it saves ~0.4–0.9 s of every cold start.
FUNCTION_CODE_TARGET_MB = 5
FUNCTION_WITH_LAYER_TARGET_MB = 150


# Not copied for the build: the checkout's version control, environments, caches, earlier build
# output and its own tests (the scaffold template's and the examples' tests are sources).
TOP_LEVEL_NOT_SOURCES = {
    ".git", ".venv", ".sam-venv", ".bench-venvs", ".waypoint", "build", "dist", "tests",
    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "node_modules",
}  # fmt: skip


def _not_sources(directory: str, names: list[str]) -> set[str]:
    ignored = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
    if Path(directory) == REPO:
        ignored |= TOP_LEVEL_NOT_SOURCES.intersection(names)
    return ignored


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Waypoint wheel, built once for the module from a copy of this checkout: a build
    in the checkout writes build/ and *.egg-info there, which two test workers would race on."""
    source = tmp_path_factory.mktemp("source") / "waypoint"
    shutil.copytree(REPO, source, ignore=_not_sources)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("waypoint-*.whl")
    return built


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return init_project(
        "demo-shop", tmp_path_factory.mktemp("new") / "demo-shop", wheel=wheel
    ).directory


# --------------------------------------------------------------------------------------------------
# The wheel


def test_the_wheel_holds_what_the_functions_need_and_no_tests(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("waypoint-")}
    assert tops == {"engine", "infra", "functions", "waypoint", "examples"}
    for handler in ("webhook", "worker", "management", "tool_task"):
        assert f"functions/{handler}.py" in names
    assert "infra/aws/stack/template.yaml" in names
    assert "infra/aws/stack/statemachine/tools.asl.json" in names
    assert "waypoint/scaffold_template/tools.py" in names
    assert "waypoint/scaffold_template/gitignore" in names
    packaged = zipfile.ZipFile(wheel).read("infra/aws/stack/template.yaml").decode()
    assert packaged == (REPO / "template.yaml").read_text(encoding="utf-8")


def test_an_installed_wheel_finds_its_own_template_and_deploys_itself(
    wheel: Path, tmp_path: Path
) -> None:
    # Installed (pip --target, outside the checkout) and first on the path: the template and ASL
    # copies inside the package are used, even beside a project's own template.yaml; `waypoint
    # init` deploys the very wheel pip installed (PEP 610 direct_url.json), and refuses to guess
    # once that file is gone.
    site, copied = tmp_path / "site", tmp_path / "dl" / wheel.name
    copied.parent.mkdir()
    shutil.copyfile(wheel, copied)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(copied),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (tmp_path / "template.yaml").write_text("not Waypoint's")
    probe = (
        "from infra.aws.stack_files import stack_file, checkout_root\n"
        "from infra.aws.asl import TOOLS_ASL\n"
        "print(stack_file('template.yaml'), TOOLS_ASL, checkout_root())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "300"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        # cwd is not the checkout: `-c` and `-m` put the working directory first on the path.
        return subprocess.run(
            [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    assert run("-c", probe).stdout.split() == [
        str(site / "infra/aws/stack/template.yaml"),
        str(site / "infra/aws/stack/statemachine/tools.asl.json"),
        "None",
    ]
    made = run("-m", "waypoint.cli", "init", "shop")
    assert made.returncode == 0, made.stdout + made.stderr
    assert (tmp_path / "shop/runtime/wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    copied.unlink()
    refused = run("-m", "waypoint.cli", "init", "shop2")
    assert refused.returncode == 2
    assert "installed from a wheel: pass that wheel with --wheel" in refused.stdout
    assert not (tmp_path / "shop2").exists()


# --------------------------------------------------------------------------------------------------
# The project


def test_init_creates_the_project_with_the_agent_named_after_it(project: Path, wheel: Path) -> None:
    files = sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file())
    assert files == [
        ".gitignore",
        "README.md",
        "agent.yaml",
        "runtime/Makefile",
        "runtime/requirements.txt",
        f"runtime/wheels/{wheel.name}",
        "statemachine/tools.asl.json",
        "template.yaml",
        "tests/shop.conv.yaml",
        "tools.py",
    ]
    agent = yaml.safe_load((project / "agent.yaml").read_text())
    assert agent["agent"]["id"] == "demo-shop" and agent["tools"] == ["check_stock", "start_return"]
    assert "__" not in (project / "README.md").read_text()
    assert (project / "statemachine/tools.asl.json").read_bytes() == (
        REPO / "statemachine/tools.asl.json"
    ).read_bytes()


def test_the_layer_installs_the_copied_wheel_by_path_never_by_name(
    project: Path, wheel: Path
) -> None:
    # `waypoint` on PyPI is another project: a bare `waypoint==0.1.0` installed a Halo client.
    lines = [
        ln.strip()
        for ln in (project / "runtime/requirements.txt").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines == [f"./wheels/{wheel.name}"]  # relative to runtime/, where the Makefile runs
    assert (project / "runtime" / lines[0]).read_bytes() == wheel.read_bytes()


# The layer's bytecode. Lambda's layers are read-only: a module without a usable .pyc is compiled
# from source on every cold start (docs/BENCHMARKS.md: ~2.5× the handlers' import time).

_COUNT_COMPILED = """
import importlib._bootstrap_external as ext, sys
compiled = []
_compile = ext.SourceLoader.source_to_code
def source_to_code(self, data, path, *args, **kwargs):
    compiled.append(path)
    return _compile(self, data, path, *args, **kwargs)
ext.SourceLoader.source_to_code = source_to_code
import functions.management, functions.worker, functions.webhook
layer = sys.argv[1]
assert functions.management.__file__.startswith(layer), functions.management.__file__
print(sum(1 for m in sys.modules.values() if (getattr(m, "__file__", None) or "").startswith(layer)))
print("\\n".join(p for p in compiled if p.startswith(layer)))
"""


def _pyc_flags(pyc: Path) -> int:
    return int.from_bytes(pyc.read_bytes()[4:8], "little")  # PEP 552: bit 0 hash, bit 1 checked


def test_the_layer_makefile_ships_bytecode_the_read_only_layer_loads_without_compiling(
    project: Path, tmp_path: Path
) -> None:
    # What `sam build` runs for the layer (BuildMethod: makefile), with pip kept offline: only the
    # Waypoint wheel is installed; its dependencies come from this environment.
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    scratch = tmp_path / "scratch"
    shutil.copytree(project / "runtime", scratch)  # SAM builds in a copy of ContentUri
    artifacts = tmp_path / "artifacts"
    built = subprocess.run(
        [
            make,
            "build-WaypointLayer",
            f"ARTIFACTS_DIR={artifacts}",
            f"LAYER_PYTHON={sys.executable}",
            "LAYER_PIP_OPTIONS=--no-deps --no-index",
        ],
        cwd=scratch,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    layer = artifacts / "python"
    sources = [p for p in layer.rglob("*.py") if "tests" not in p.relative_to(layer).parts]
    assert len(sources) > 100
    tag = sys.implementation.cache_tag
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert pyc.is_file(), source
        assert _pyc_flags(pyc) == 0b01, pyc  # hash-based, source never checked
    # The zip round trip changes mtimes: timestamp-checked bytecode would be ignored after it.
    for source in sources:
        os.utime(source, (1_000_000_000, 1_000_000_000))
    for path in [layer, *layer.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)  # read-only, like /opt in Lambda
    try:
        run = subprocess.run(
            [sys.executable, "-c", _COUNT_COMPILED, str(layer)],
            cwd=tmp_path,  # not the checkout, whose own packages would shadow the layer's
            env={**os.environ, "PYTHONPATH": str(layer), "AWS_DEFAULT_REGION": "us-east-1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        for path in [layer, *layer.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded, *compiled = run.stdout.strip().splitlines()
    assert int(loaded) > 30  # the handlers' modules came from the layer ...
    assert compiled == []  # ... and none of them was compiled from source


def test_init_refuses_a_folder_that_is_not_empty_and_touches_nothing(tmp_path: Path) -> None:
    target = tmp_path / "shop"
    target.mkdir()
    (target / "agent.yaml").write_text("mine")
    result = runner.invoke(
        app, ["init", "shop", "--directory", str(target)], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 2
    assert result.output.count("\n") == 1, result.output  # one clear line
    assert "already exists and is not empty; waypoint init never overwrites files" in result.output
    assert [p.name for p in target.iterdir()] == ["agent.yaml"]
    assert (target / "agent.yaml").read_text() == "mine"


def test_init_refuses_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "shop").write_text("a file")
    with pytest.raises(ScaffoldError, match="already exists"):
        init_project("shop", tmp_path / "shop")


@pytest.mark.parametrize("name", ["my shop", "_shop", "../shop", "x" * 101])
def test_init_refuses_a_name_that_cannot_be_an_agent_id(name: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", name, "--directory", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert "is not usable as the agent id" in result.output
    assert not (tmp_path / "p").exists()


def test_init_refuses_a_wheel_that_is_not_waypoints(tmp_path: Path) -> None:
    other = tmp_path / "requests-2.0-py3-none-any.whl"
    other.write_bytes(b"PK")
    with pytest.raises(ScaffoldError, match="not a Waypoint wheel"):
        init_project("shop", tmp_path / "a", wheel=other)
    with pytest.raises(ScaffoldError, match="no such file"):
        init_project("shop", tmp_path / "b", wheel=tmp_path / "waypoint-0.1.0-py3-none-any.whl")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# --------------------------------------------------------------------------------------------------
# The project's SAM template


def test_the_projects_template_passes_cfn_lint(project: Path) -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), str(project / "template.yaml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


class _NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


def _transform(template: dict[str, Any]) -> dict[str, Any]:
    from samtranslator.translator.transform import transform

    template = copy.deepcopy(template)
    template["Globals"]["Function"]["CodeUri"] = "s3://artifacts/code.zip"
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::StateMachine":
            resource["Properties"]["DefinitionUri"] = "s3://artifacts/tools.asl.json"
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = "s3://artifacts/layer.zip"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        result: dict[str, Any] = transform(template, {}, _NoManagedPolicies())
    return result


def test_the_projects_template_deploys_waypoints_functions_with_its_tools_and_the_layer(
    project: Path,
) -> None:
    ours = load_template(project / "template.yaml")
    waypoints = _transform(load_template())
    theirs = _transform(ours)
    functions = {
        lid: r["Properties"]
        for lid, r in theirs["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function"
    }
    reference = {
        lid: r["Properties"]
        for lid, r in waypoints["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert (
        set(functions)
        == set(reference)
        == {
            "WebhookFunction",
            "WorkerFunction",
            "ManagementFunction",
            "ToolFunction",
            "HandoffSweepFunction",
        }
    )
    for lid, props in functions.items():
        # The same handler (from the installed package), runtime, environment and role policies.
        for key in ("Handler", "Runtime", "Architectures", "Timeout", "MemorySize", "Environment"):
            assert props.get(key) == reference[lid].get(key), (lid, key)
        assert props["Layers"] == [{"Ref": _layer_id(theirs)}]
    for lid in reference:
        role = f"{lid}Role"
        assert theirs["Resources"][role]["Properties"] == waypoints["Resources"][role]["Properties"]
    # Everything else Waypoint deploys is there too: table, bucket, queues, APIs, state machine.
    assert set(waypoints["Resources"]) <= set(theirs["Resources"])
    assert ours["Parameters"]["ToolsModule"]["Default"] == "tools"
    assert ours["Parameters"]["AgentId"]["Default"] == "demo-shop"
    layer = ours["Resources"]["WaypointLayer"]
    assert layer["Properties"]["ContentUri"] == "runtime/"
    # runtime/Makefile: the layer's packages for arm64, then their bytecode (see the tests above)
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}


def _layer_id(transformed: dict[str, Any]) -> str:
    (lid,) = [
        lid
        for lid, r in transformed["Resources"].items()
        if r["Type"] == "AWS::Lambda::LayerVersion"
    ]
    return lid


def test_a_changed_waypoint_template_fails_loudly_instead_of_deploying_the_wrong_code() -> None:
    text = (REPO / "template.yaml").read_text(encoding="utf-8")
    with pytest.raises(ScaffoldError, match="cannot set the tools module"):
        deployable_template(text.replace("examples.banking.tools", "bank.tools"), agent_id="x")
    with pytest.raises(ScaffoldError, match="where each function's code comes from"):
        deployable_template(
            text.replace("CodeUri: infra/aws/function_code/", "CodeUri: ."), agent_id="x"
        )
    with pytest.raises(ScaffoldError, match="where the layer is built from"):
        deployable_template(text.replace("ContentUri: .\n", "ContentUri: x/\n"), agent_id="x")
    # The text is still YAML CloudFormation after the edits.
    assert yaml.load(deployable_template(text, agent_id="x"), Loader=CloudFormationLoader)


# --------------------------------------------------------------------------------------------------
# `sam build`, where the SAM CLI is installed (make scaffold-check installs it in its own venv)


def _sam() -> str | None:
    return os.environ.get("WAYPOINT_SAM") or shutil.which("sam")


def _megabytes(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def test_sam_build_of_a_new_project_stays_under_the_size_targets(project: Path) -> None:
    sam = _sam()
    if sam is None or shutil.which("python3.11") is None:
        # `make scaffold-check` (CI) sets WAYPOINT_REQUIRE_SAM: there a missing sam is a failure.
        missing = "`sam` (aws-sam-cli: make scaffold-check installs it) or python3.11 not on PATH"
        if os.environ.get("WAYPOINT_REQUIRE_SAM"):
            pytest.fail(missing)
        pytest.skip(missing)
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    lint = subprocess.run(
        [sam, "validate", "--lint", "--region", "us-east-1"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    build = subprocess.run(
        [sam, "build"], cwd=project, env=env, capture_output=True, text=True, timeout=900
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    built = project / ".aws-sam" / "build"
    layer = built / "WaypointLayer" / "python"
    for package in ("engine", "infra", "functions", "waypoint", "numpy", "pydantic"):
        assert (layer / package).is_dir(), package
    assert not (layer / "tests").exists() and not (layer / "moto").exists()
    tag = "cpython-311"  # the functions' runtime, whatever runs this test
    for package in ("engine", "infra", "functions", "fastapi", "pydantic", "botocore"):
        for source in (layer / package).rglob("*.py"):
            pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
            assert pyc.is_file() and _pyc_flags(pyc) == 0b01, source
    layer_mb = _megabytes(built / "WaypointLayer")
    for function in ("WebhookFunction", "WorkerFunction", "ManagementFunction", "ToolFunction"):
        code_mb = _megabytes(built / function)
        assert (built / function / "tools.py").is_file()
        assert code_mb < FUNCTION_CODE_TARGET_MB, (function, code_mb)
        assert code_mb + layer_mb < FUNCTION_WITH_LAYER_TARGET_MB, (function, code_mb, layer_mb)
    print(f"layer {layer_mb:.1f} MB, function code {code_mb:.2f} MB (unzipped)")

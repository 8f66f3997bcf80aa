"""The package is typed (PEP 561): `py.typed` is in the installed package, and in the wheel that
pyproject.toml's build backend makes (built offline, with the hatchling pinned beside the tests
at the version pyproject.toml asks for). No server needed."""

import importlib.metadata
import importlib.resources
import pathlib
import zipfile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from hatchling.builders.wheel import WheelBuilder

CLIENT = pathlib.Path(__file__).resolve().parents[1]


def test_py_typed_is_in_the_installed_package():
    marker = importlib.resources.files("loadout") / "py.typed"
    assert marker.is_file(), f"no py.typed in {importlib.resources.files('loadout')}: type checkers ignore the hints"


def test_the_wheel_ships_py_typed_beside_the_modules(tmp_path):
    pyproject = tomllib.loads((CLIENT / "pyproject.toml").read_text(encoding="utf-8"))
    pinned = f"hatchling=={importlib.metadata.version('hatchling')}"
    assert pyproject["build-system"]["requires"] == [pinned], "the tests' hatchling is not the build backend's"
    wheel = next(iter(WheelBuilder(str(CLIENT)).build(directory=str(tmp_path), versions=["standard"])))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        recorded = {line.split(",")[0] for line in z.read(record).decode().splitlines()}
    assert {"loadout/__init__.py", "loadout/client.py", "loadout/py.typed"} <= names, sorted(names)
    assert "loadout/py.typed" in recorded

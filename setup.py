"""The package list of the one import name `payops` (the project's metadata lives in pyproject.toml).

The repository keeps its top-level folders (connectors/, deployments/, flows/, sandbox/, store/, tasks/); each
installs below `payops`. pyproject.toml cannot map a folder and all its sub-packages to a new name without
listing every sub-package by hand, so they are found here.
"""

import ast
from pathlib import Path

from setuptools import find_packages, setup

# payops/__init__.py names the folders (read, not imported: nothing is installed yet)
FOLDERS = next(
    ast.literal_eval(node.value)
    for node in ast.parse(Path(__file__).with_name("payops").joinpath("__init__.py").read_text()).body
    if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["FOLDERS"]
)

setup(
    packages=["payops"]
    + [f"payops.{folder}" for folder in FOLDERS]
    + [f"payops.{folder}.{sub}" for folder in FOLDERS for sub in find_packages(folder)],
    package_dir={"payops": "payops", **{f"payops.{folder}": folder for folder in FOLDERS}},
)

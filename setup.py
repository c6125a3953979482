"""Packaging that pyproject.toml cannot say: the top-level ``conf/`` ships inside the package as
``gnntrain.conf``, so the installed command finds its config groups through Hydra's ``pkg://``
search path, and gnntrain's sweeper ships in Hydra's ``hydra_plugins`` namespace, the only place
Hydra takes a sweeper from. Code packages and config groups (every folder under ``conf/``) are
discovered: a new one needs no packaging line."""

from setuptools import find_namespace_packages, find_packages, setup

CONFIG_GROUPS = [f"gnntrain.conf.{group}" for group in find_namespace_packages(where="conf")]

setup(
    packages=[*find_packages(include=["gnntrain", "gnntrain.*"]), "gnntrain.conf", *CONFIG_GROUPS,
              "hydra_plugins.gnntrain_sweeper"],
    package_dir={"gnntrain.conf": "conf"},
    package_data={"": ["*.yaml"]},
)

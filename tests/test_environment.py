"""The environment the project pins: one PySpark, Python and jars of the same version."""

from pathlib import Path

import pyspark


def test_pyspark_python_matches_its_jars():
    jars = Path(pyspark.__file__).parent / "jars"
    core = list(jars.glob("spark-core_*.jar"))
    assert core, "pyspark has no jars: pyspark-client may have replaced it"
    assert core[0].name.endswith(f"-{pyspark.__version__}.jar"), (core[0].name, pyspark.__version__)


def test_requirements_pin_everything_exactly():
    lines = [x for x in (Path(__file__).parents[1] / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert all("==" in x for x in lines), [x for x in lines if "==" not in x]
    pins = dict(x.split("==") for x in lines)
    assert pins["pyspark"] == pins["pyspark-client"]

"""The DS2 policy as a Spark job: every (job, epoch) of the input in one pass.

Offline, like the reference tool::

    spark-submit spark_jobs/ds2_policy.py --topology T.csv --rates R.log [--source-rates S.csv]
        [--factor F] [--threshold T] --json
    spark-submit spark_jobs/ds2_policy.py --topology T.csv --rates-dir DIR --json

Live and backfill, from the metrics store (decisions go to the same store)::

    spark-submit spark_jobs/ds2_policy.py --topology T.csv --store data/store --job J \
        --from-epoch A --to-epoch B --run-type backfill

JSON lines go to stdout; Spark's logging and warnings to stderr. Bad input exits with
status 2 and one line naming the input and the problem.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid
from datetime import UTC, datetime

from autoscaler.collect.ds2_files import read_source_rates
from autoscaler.config.options import POLICY_KINDS
from autoscaler.config.policy_options import PolicyOptions
from autoscaler.errors import InputError
from autoscaler.report import decision_table
from autoscaler.store.schemas import DECISIONS
from autoscaler.topology import read_topology_csv

RUN_TYPES = ("offline", "live", "backfill", "what-if")


def _bounds(values: list[str], flag: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in values:
        name, sep, number = item.rpartition("=")
        if not sep or not name:
            raise InputError(flag, f"expected OPERATOR=N, got {item!r}")
        try:
            out[name] = int(number)
        except ValueError:
            raise InputError(flag, f"{item!r}: {number!r} is not an integer") from None
    return out


def _help(described: dict[str, tuple[object, str]], name: str) -> str:
    default, meaning = described[name]
    return f"{meaning} (default: {default!r})".replace("%", "%%")


def policy_options(args: argparse.Namespace) -> PolicyOptions:
    """``--options`` (the DAG's JSON), then each flag given on top of it."""
    base = json.loads(PolicyOptions.from_json(args.options).to_json()) if args.options else {}
    flags = {
        "kind": args.kind,
        "factor": args.factor,
        "threshold": args.threshold,
        "min_parallelism": _bounds(args.min_parallelism, "--min-parallelism") or None,
        "max_parallelism": _bounds(args.max_parallelism, "--max-parallelism") or None,
        "job_max_parallelism": args.job_max_parallelism,
        "align_to_key_groups": args.align_to_key_groups,
    }
    return PolicyOptions(**{**base, **{k: v for k, v in flags.items() if v is not None}})


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ds2_policy", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topology", required=True, help="DS2 topology CSV (edges)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--rates", help="DS2 rates log (8 columns)")
    source.add_argument("--rates-dir", help="folder of online rate files <operator>-<instance>-<epoch>.<ext>")
    source.add_argument("--metrics-store", action="store_true", help="read metrics of --job from --store")
    parser.add_argument("--source-rates", help="source-rate override file (operator_id,rate_per_instance)")
    parser.add_argument("--store", help="store root: decisions are written here (and metrics read with --metrics-store)")
    parser.add_argument(
        "--decisions-store",
        help="store root the decisions go to (default: --store); what-if runs use their own so live decisions stay untouched",
    )
    parser.add_argument("--job", default="ds2-offline", help="job name (default: ds2-offline)")
    parser.add_argument("--from-epoch", type=int, help="first epoch (inclusive, store input)")
    parser.add_argument("--to-epoch", type=int, help="last epoch (inclusive, store input)")
    # Defaults and meanings come from autoscaler.config.options; a flag left out keeps the default.
    described = {name: (default, meaning) for name, default, meaning in PolicyOptions.describe()}
    policy = parser.add_argument_group("policy options (default: the option's default)")
    policy.add_argument(
        "--options", metavar="JSON", help="all policy options as JSON, as the DAG passes them (flags below override)"
    )
    policy.add_argument("--kind", choices=POLICY_KINDS, help=_help(described, "kind"))
    policy.add_argument("--factor", type=float, help=_help(described, "factor"))
    policy.add_argument("--threshold", type=float, help=_help(described, "threshold"))
    policy.add_argument(
        "--min-parallelism", action="append", default=[], metavar="OP=N", help=_help(described, "min_parallelism")
    )
    policy.add_argument(
        "--max-parallelism", action="append", default=[], metavar="OP=N", help=_help(described, "max_parallelism")
    )
    policy.add_argument("--job-max-parallelism", type=int, help=_help(described, "job_max_parallelism"))
    policy.add_argument("--align-to-key-groups", action="store_true", default=None, help=_help(described, "align_to_key_groups"))
    parser.add_argument("--run-type", choices=RUN_TYPES, help="recorded with the decisions (default: offline or live)")
    parser.add_argument("--run-id", help="recorded with the decisions (default: a new uuid)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON object per (epoch, operator)")
    output.add_argument("--table", action="store_true", help="print the decisions as a text table")
    parser.add_argument("--master", help="Spark master when not run by spark-submit")
    args = parser.parse_args(argv)
    if args.metrics_store and not args.store:
        parser.error("--metrics-store needs --store")
    return args


def run(argv: list[str]) -> int:
    args = parse_args(argv)
    topology = read_topology_csv(args.topology)
    options = policy_options(args).resolved(topology)
    source_rates = read_source_rates(args.source_rates, topology) if args.source_rates else None

    # Spark is imported only now: argument and file errors above need no JVM.
    from autoscaler.engine.spark import decisions, inputs
    from autoscaler.engine.spark.run import StoreRun, decide_stored_epochs
    from autoscaler.engine.spark.session import policy_session
    from autoscaler.store import spark as store

    spark = policy_session(master=args.master)
    run_type = args.run_type or ("live" if args.metrics_store else "offline")
    run_id = args.run_id or uuid.uuid4().hex
    if args.metrics_store:
        # The live, backfill and what-if path: the same function the Spark Connect engine runs.
        run = StoreRun(args.store, args.job, args.from_epoch, args.to_epoch, run_type, run_id, args.topology, options,
                       args.decisions_store)  # fmt: skip
        decide_stored_epochs(spark, run, topology, source_rates=source_rates)
        _print_decisions(args, spark, run.decisions_root, run_id, topology)
        return 0
    run_info = decisions.RunInfo(run_id, run_type, datetime.now(UTC).replace(microsecond=0))
    # Decisions are committed only after the input checks pass; without --store they go to a
    # temporary store so that --json prints exactly what was checked, once.
    root = args.decisions_store or args.store or tempfile.mkdtemp(prefix="ds2-policy-")
    try:
        if args.rates and _rates_log_by_blocks(spark, args, topology, options, run_info, source_rates, root):
            _print_decisions(args, spark, root, run_id, topology)
            return 0
        checks = []
        bound = None
        if args.rates:
            metrics, counts = inputs.rates_log(spark, args.rates, topology, args.job)
            checks.append(lambda: inputs.raise_for_bad_lines(counts, args.rates, topology))
            bound = decisions.topology_parallelism(topology)
        else:
            metrics, skipped = inputs.rate_files(spark, args.rates_dir, topology, args.job)
            if skipped:
                print(f"ds2_policy: skipped incomplete epochs {skipped} in {args.rates_dir}", file=sys.stderr)
        rows = decisions.policy_decisions(metrics, topology, options, run_info, source_rates, max_parallelism=bound)

        def check_all() -> None:
            for check in checks:
                check()

        store.write_epochs(rows.drop("op_index"), root, DECISIONS, args.job, before_commit=check_all)
        _print_decisions(args, spark, root, run_id, topology)
    finally:
        if not (args.store or args.decisions_store):
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _rates_log_by_blocks(spark: object, args: argparse.Namespace, topology: object, options: object, run_info: object,
                         source_rates: dict[str, float] | None, root: str) -> bool:  # fmt: skip
    """A rates log in timestamp order per instance, decided block by block (policy.spark.rates_log); False
    when it needs Spark's general path (out of order, or a line to name as bad)."""
    from autoscaler.engine.spark.blocks import BlockRun
    from autoscaler.engine.spark.rates_log import decide_rates_log

    run = BlockRun("", root, args.job, topology, options, run_info, dict(source_rates or {}), None, None)
    return decide_rates_log(spark, run, args.rates) is not None


def _print_decisions(args: argparse.Namespace, spark: object, root: str, run_id: str, topology: object) -> None:
    """--json: one JSON object per (epoch, operator); --table: a text table; otherwise nothing."""
    if not (args.json or args.table):
        return
    from autoscaler.engine.spark import decisions, inputs

    rows = (r.asDict() for r in inputs.stored_decisions(spark, root, args.job, run_id, topology).toLocalIterator())
    if args.json:
        for row in rows:
            print(decisions.decision_json(row))
    else:
        print(decision_table(rows))


def _real_stderr() -> None:
    """Point sys.stderr at the terminal's stderr when spark-submit merged ours into stdout.

    spark-submit runs the Python driver with stderr redirected into stdout, which would mix
    errors and warnings into the JSON lines. The JVM that started us still has the real
    stderr as its fd 2 (Linux: /proc/<parent>/fd/2).
    """
    if "SPARK_ENV_LOADED" not in os.environ and "PYSPARK_GATEWAY_PORT" not in os.environ:
        return
    try:
        same = os.path.samestat(os.fstat(1), os.fstat(2))
        if same:
            sys.stderr = open(f"/proc/{os.getppid()}/fd/2", "w", buffering=1)
    except OSError:
        pass


def main() -> None:
    _real_stderr()
    try:
        code = run(sys.argv[1:])
    except InputError as exc:
        print(f"ds2_policy: error: {exc}", file=sys.stderr)
        code = 2
    except Exception as exc:  # Spark/JVM failures: one readable line; DS2_DEBUG=1 for the traceback
        if os.environ.get("DS2_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"ds2_policy: error: the Spark job failed: {type(exc).__name__}: {first}", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()

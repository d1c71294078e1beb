"""The ``--ray`` flags shared by the commands that score (``rerank``, ``embed``)."""

from __future__ import annotations

import argparse

from evirank.scale.options import RayOptions


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, found {text}")
    return value


def add_ray_arguments(parser: argparse.ArgumentParser, *, query_block: bool = True) -> None:
    """Add the ``ray`` group: ``--ray``, ``--ray-workers``, ``--ray-cpus``, ``--ray-gpus`` and, with
    ``query_block``, ``--query-block`` (commands that score queries)."""
    group = parser.add_argument_group("scale-out (Ray)")
    group.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run the model on Ray: local (default: a Ray instance on this machine), auto (the cluster "
        "this machine joined with `ray start`), or a cluster address HOST:PORT",
    )
    group.add_argument(
        "--ray-workers",
        type=_positive_int,
        metavar="N",
        help="model replicas (default: one per GPU with --ray-gpus, else one per --ray-cpus cores)",
    )
    group.add_argument(
        "--ray-cpus", type=_non_negative, default=1.0, metavar="C", help="cores per replica (default 1)"
    )
    group.add_argument(
        "--ray-gpus",
        type=_non_negative,
        default=0.0,
        metavar="G",
        help="GPUs per replica (default 0; 1 on GPUs)",
    )
    if not query_block:
        return
    group.add_argument(
        "--query-block",
        type=_positive_int,
        metavar="N",
        help="re-rank N queries at a time, so only one block's texts are in memory "
        "(default: all at once); with the same N and threads the run is the same with and without --ray",
    )


def ray_options(args: argparse.Namespace) -> RayOptions | None:
    """The :class:`RayOptions` the flags ask for, or None without ``--ray``."""
    address = getattr(args, "ray", None)
    if address is None:
        return None
    return RayOptions(
        address=address,
        workers=args.ray_workers,
        cpus_per_worker=args.ray_cpus or 1.0,
        gpus_per_worker=args.ray_gpus,
    )

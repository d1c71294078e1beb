"""Grid parsing: ranges with both ends, explicit lists, product order, and clear errors."""

from __future__ import annotations

import pytest

from evirank.tune import GridError, parse_aggregate, parse_grid
from evirank.tune.runner import default_grid


def test_birch_grid_has_1331_exact_settings_in_product_order() -> None:
    grid = parse_grid("alpha=0:1:0.1 w2=0:1:0.1 w3=0:1:0.1")
    assert len(grid) == 1331
    assert grid.axes[0] == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    settings = grid.settings
    assert settings.shape == (1331, 3)
    assert settings[0].tolist() == [0.0, 0.0, 0.0]
    assert settings[1].tolist() == [0.0, 0.0, 0.1]  # the last axis varies fastest
    assert settings[11].tolist() == [0.0, 0.1, 0.0]
    assert settings[-1].tolist() == [1.0, 1.0, 1.0]
    assert grid.setting(121) == {"alpha": 0.1, "w2": 0.0, "w3": 0.0}


def test_lists_single_values_and_tokens_from_argparse() -> None:
    grid = parse_grid(["alpha=0.5,0.3", "w2=1", "w3=0:0.5:0.25"])
    assert grid.axes == ((0.5, 0.3), (1.0,), (0.0, 0.25, 0.5))
    assert parse_grid(grid.spec()) == grid
    assert parse_grid("a=0:1:0.3").axes == ((0.0, 0.3, 0.6, 0.9),)


def test_defaults_fill_unset_parameters() -> None:
    grid = parse_grid("alpha=0,1").with_defaults(parse_aggregate("birch:2").defaults())
    assert grid.names == ("alpha", "w1", "w2")
    assert grid.settings.tolist() == [[0.0, 1.0, 0.5], [1.0, 1.0, 0.5]]
    assert len(default_grid(parse_aggregate("birch:3"))) == 1331
    assert default_grid(parse_aggregate("birch:1")).names == ("alpha", "w1")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("", "empty grid"),
        ("alpha", "expected NAME="),
        ("alpha=0:1", "three numbers"),
        ("alpha=0:1:0", "step must be > 0"),
        ("alpha=1:0:0.1", "below START"),
        ("alpha=0.1,x", "not a number"),
        ("alpha=0.1,0.1", "repeated"),
        ("alpha=0,1 alpha=0.5", "given twice"),
        ("alpha=0:1:1e-9", "too many"),
        ("alpha=nan", "not a number"),
        ("alpha=0:1e999:1", "finite"),
    ],
)
def test_bad_grids_say_what_is_wrong(spec: str, words: str) -> None:
    with pytest.raises(GridError, match=words):
        parse_grid(spec)

"""The one number format the pages use (pages/views/markup.py)."""

from pages.views.markup import fmt_count, fmt_ms, fmt_on_scale, fmt_pct, fmt_score, status_markdown


def test_scores_have_two_decimals():
    assert [fmt_score(0.8349), fmt_score(4.0), fmt_score(None)] == ["0.83", "4.00", "n/a"]


def test_a_mean_shows_its_scale_unless_it_is_0_to_1():
    assert [fmt_on_scale(0.834, (0.0, 1.0)), fmt_on_scale(4.2, (1.0, 5.0)), fmt_on_scale(None, (1.0, 5.0))] == [
        "0.83",
        "4.20 /5",
        "n/a",
    ]


def test_the_cli_writes_a_mean_on_its_scale_as_the_pages_do():
    from pipeline.cli.reports import fmt_mean

    assert [
        fmt_mean(4.2, "judge_correctness"),
        fmt_mean(0.834, "faithfulness"),
        fmt_mean(None, "judge_helpfulness"),
    ] == [
        "4.20 /5",
        "0.83",
        "n/a",
    ]


def test_percentages_counts_and_durations():
    assert fmt_pct(0.834) == "83%" and fmt_pct(0.0456, 1) == "4.6%" and fmt_pct(None) == "n/a"
    assert fmt_count(1234567) == "1,234,567" and fmt_count(0) == "0"
    assert [fmt_ms(850), fmt_ms(1234), fmt_ms(59_949), fmt_ms(125_400), fmt_ms(None)] == [
        "850 ms",
        "1.2 s",
        "59.9 s",
        "2 min 5 s",
        "n/a",
    ]


def test_a_status_shows_a_material_icon_instead_of_its_emoji():
    assert status_markdown("✅ accepted: faithfulness at or above the threshold", "accepted") == (
        ":material/check_circle: accepted\\: faithfulness at or above the threshold"
    )
    assert status_markdown("ℹ️ no checkable claims", "no_claims") == ":material/info: no checkable claims"


def test_a_change_is_signed_in_its_figures_format():
    from pipeline.formatting import fmt_change, fmt_cost, fmt_count, fmt_ms

    assert fmt_change(-1500, fmt_ms) == "-1.5 s" and fmt_change(600, fmt_ms) == "+600 ms"
    assert fmt_change(-12345, fmt_count) == "-12,345" and fmt_change(0, fmt_count) == "0"
    assert fmt_change(0.0001, fmt_cost) == "+0.0001" and fmt_change(None, fmt_ms) == "n/a"

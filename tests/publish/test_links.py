"""Where pages live and how emails address them below reports_url."""

from datetime import date

import pytest

from billing.publish.links import day_page, page_url, slug, team_page

DAY = date(2026, 11, 20)


@pytest.mark.parametrize("reports_url", ["https://billing.example.org/reports", "https://billing.example.org/reports/"])
def test_pages_join_reports_url_with_or_without_its_trailing_slash(reports_url):
    assert page_url(reports_url, day_page(DAY)) == "https://billing.example.org/reports/2026-11-20/index.html"
    assert page_url(reports_url, team_page(DAY, "robotics")) == (
        "https://billing.example.org/reports/2026-11-20/teams/robotics.html")


def test_a_host_without_a_path_and_a_query_string_are_kept():
    assert page_url("http://billing:8080", day_page(DAY)) == "http://billing:8080/2026-11-20/index.html"
    assert page_url("https://b.example.org/r?key=1", "index.html") == "https://b.example.org/r/index.html?key=1"


def test_no_reports_url_no_link():
    assert page_url("", team_page(DAY, "robotics")) == ""


def test_any_team_name_is_a_safe_path_segment():
    name = 'a/b c?#&"<x>'
    url = page_url("https://billing.example.org/", team_page(DAY, name))
    assert url == f"https://billing.example.org/2026-11-20/teams/{slug(name)}.html"
    assert url.count("/") == 5 and not any(c in url.split("teams/")[1] for c in ' ?#&"<>')

"""The one HTTP setting: `--http` / LOGAN_RAY_HTTP = off | [HOST]:PORT[/PREFIX], default Serve's 127.0.0.1:8000."""
from __future__ import annotations

import pytest

from logan_ray.http.settings import HttpSettings, parse_http_setting


def test_default_is_ray_serves_usual_address_with_the_api_at_the_root(monkeypatch):
    monkeypatch.delenv("LOGAN_RAY_HTTP", raising=False)
    s = parse_http_setting(None)
    assert (s.host, s.port, s.route_prefix) == ("127.0.0.1", 8000, "/") and s.url == "http://127.0.0.1:8000"


def test_environment_moves_it_and_the_flag_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("LOGAN_RAY_HTTP", "0.0.0.0:9000/api")
    assert parse_http_setting(None) == HttpSettings("0.0.0.0", 9000, "/api")
    assert parse_http_setting(None).url == "http://127.0.0.1:9000/api"
    assert parse_http_setting(":8080") == HttpSettings("127.0.0.1", 8080, "/")


@pytest.mark.parametrize("off", ["off", "OFF", "none", "false"])
def test_off_disables_it(off):
    assert parse_http_setting(off) is None


@pytest.mark.parametrize("bad", ["localhost:http", "127.0.0.1:0", "127.0.0.1:70000"])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError, match="--http"):
        parse_http_setting(bad)

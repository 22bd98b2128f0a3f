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


def test_allowed_hosts_come_from_the_flag_or_the_environment_in_lower_case(monkeypatch):
    monkeypatch.setenv("LOGAN_RAY_HTTP_ALLOWED_HOSTS", "Broker1.Example.com, [fd00::1]")
    assert parse_http_setting("0.0.0.0:8000").allowed_hosts == ("broker1.example.com", "fd00::1")
    assert parse_http_setting("0.0.0.0:8000", "console.example.com").allowed_hosts == ("console.example.com",)


@pytest.mark.parametrize("bad", ["https://broker1.example.com", "broker1.example.com:8000", "a b"])
def test_an_allowed_host_with_a_scheme_or_port_is_refused(bad):
    with pytest.raises(ValueError, match="--http-allowed-hosts"):
        parse_http_setting("0.0.0.0:8000", bad)


@pytest.mark.parametrize("where", ["0.0.0.0:8000", "10.0.0.5:8000", ":8000/api"])
def test_an_open_api_beyond_loopback_is_refused_unless_insecure_is_asked_for(where):
    from logan_ray.http.settings import check_exposure

    settings = parse_http_setting(where) if not where.startswith(":") else HttpSettings("", 8000, "/api")
    with pytest.raises(ValueError, match="--http-insecure") as refused:
        check_exposure(settings, authenticates=False, insecure=False)
    assert "\n" not in str(refused.value)
    warning = check_exposure(settings, authenticates=False, insecure=True)
    assert "WARNING" in warning and "\n" not in warning
    assert check_exposure(settings, authenticates=True, insecure=False) is None


@pytest.mark.parametrize("where", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "off"])
def test_loopback_or_off_needs_no_option(where):
    from logan_ray.http.settings import check_exposure

    assert check_exposure(parse_http_setting(where), authenticates=False, insecure=False) is None

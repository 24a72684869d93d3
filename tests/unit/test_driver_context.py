"""Driver options from keyword arguments, AERONIO_* variables and a TOML/JSON file."""

import json

import pytest

from aeronio.driver.context import DriverContext, env_var_name, parse_option_value
from aeronio.errors import ConfigurationError


def write(path, text):
    path.write_text(text)
    return path


def test_defaults_and_new_fields():
    ctx = DriverContext.from_sources()
    assert ctx.ipc_term_length == 64 * 1024 * 1024
    assert ctx.client_keepalive_interval_ns == 500_000_000
    assert ctx.dir  # a fresh default directory
    assert DriverContext.from_sources(env={}, dir=ctx.dir) == DriverContext.from_options(
        dir=ctx.dir
    )


def test_precedence_options_over_env_over_file_over_defaults(tmp_path):
    config = write(
        tmp_path / "driver.toml",
        'ipc-term-length = "1m"\nipc_mtu = 4096\nmax_counters = 100\ndir = "/tmp/from-file"\n',
    )
    env = {"AERONIO_IPC_MTU": "8192", "AERONIO_MAX_COUNTERS": "200", "PATH": "/bin"}
    ctx = DriverContext.from_sources(config_file=config, env=env, max_counters=300)
    assert ctx.ipc_term_length == 1 << 20  # file only
    assert ctx.ipc_mtu == 8192  # env over file
    assert ctx.max_counters == 300  # option over env and file
    assert ctx.dir == "/tmp/from-file"
    assert ctx.publication_linger_ns == 5_000_000_000  # default
    env["AERONIO_DIR"] = "/dev/shm/x"
    assert DriverContext.from_sources(config_file=config, env=env).dir == "/dev/shm/x"


def test_given_defaults_rank_below_every_source(tmp_path):
    """`defaults` (a standalone driver's) replace the fields' own and nothing else."""
    defaults = {"conductor_idle_spins": 0, "max_counters": 64}
    assert DriverContext.from_sources(defaults).conductor_idle_spins == 0
    config = write(tmp_path / "driver.toml", "conductor_idle_spins = 5\n")
    env = {"AERONIO_MAX_COUNTERS": "200"}
    ctx = DriverContext.from_sources(defaults, config_file=config, env=env)
    assert (ctx.conductor_idle_spins, ctx.max_counters) == (5, 200)
    ctx = DriverContext.from_sources(defaults, conductor_idle_spins=7)
    assert (ctx.conductor_idle_spins, ctx.max_counters) == (7, 64)
    with pytest.raises(ConfigurationError, match="defaults: max_counters must be of type int"):
        DriverContext.from_sources({"max_counters": "64"})


def test_json_file_with_typed_and_text_values(tmp_path):
    config = write(
        tmp_path / "driver.json",
        json.dumps(
            {
                "ipc_term_length": 131072,
                "publication-linger-ns": "250ms",
                "term_buffer_sparse_file": False,
                "dir_delete_on_shutdown": "no",
            }
        ),
    )
    ctx = DriverContext.from_sources(config_file=str(config))
    assert ctx.ipc_term_length == 131072
    assert ctx.publication_linger_ns == 250_000_000
    assert ctx.term_buffer_sparse_file is False
    assert ctx.dir_delete_on_shutdown is False


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("ipc_term_length", "64k", 65536),
        ("ipc_term_length", "64m", 64 << 20),
        ("ipc_term_length", "1G", 1 << 30),
        ("ipc_term_length", "131072", 131072),
        ("ipc_mtu", "4k", 4096),
        ("publication_linger_ns", "1500", 1500),
        ("publication_linger_ns", "10ns", 10),
        ("publication_linger_ns", "20us", 20_000),
        ("publication_linger_ns", "30ms", 30_000_000),
        ("publication_linger_ns", "4s", 4_000_000_000),
        ("max_counters", "64", 64),
        ("term_buffer_sparse_file", "true", True),
        ("term_buffer_sparse_file", "Yes", True),
        ("term_buffer_sparse_file", "1", True),
        ("term_buffer_sparse_file", "false", False),
        ("term_buffer_sparse_file", "NO", False),
        ("term_buffer_sparse_file", "0", False),
        ("dir", "/dev/shm/a b", "/dev/shm/a b"),
    ],
)
def test_env_text_is_converted_to_the_option_type(name, text, value):
    ctx = DriverContext.from_sources(env={env_var_name(name): text})
    assert getattr(ctx, name) == value
    assert type(getattr(ctx, name)) is type(value)
    assert parse_option_value(name, text, "--x") == value


@pytest.mark.parametrize(
    ("var", "text", "expected"),
    [
        (
            "AERONIO_IPC_TERM_LENGTH",
            "1000",
            r"AERONIO_IPC_TERM_LENGTH: ipc_term_length 1000 must",
        ),
        ("AERONIO_IPC_TERM_LENGTH", "64x", r"AERONIO_IPC_TERM_LENGTH: .*ipc_term_length.*'64x'"),
        ("AERONIO_IPC_MTU", "100", r"AERONIO_IPC_MTU: ipc_mtu 100 must be a multiple of 32"),
        ("AERONIO_PUBLICATION_LINGER_NS", "soon", r"AERONIO_PUBLICATION_LINGER_NS: .*linger"),
        ("AERONIO_PUBLICATION_LINGER_NS", "5h", r"AERONIO_PUBLICATION_LINGER_NS: .*'5h'"),
        ("AERONIO_MAX_COUNTERS", "1", r"AERONIO_MAX_COUNTERS: max_counters 1 must be at least"),
        ("AERONIO_MAX_COUNTERS", "1k", r"AERONIO_MAX_COUNTERS: invalid integer .*max_counters"),
        ("AERONIO_TERM_BUFFER_SPARSE_FILE", "maybe", r"SPARSE_FILE: .*term_buffer_sparse_file"),
        (
            "AERONIO_CLIENT_KEEPALIVE_INTERVAL_NS",
            "0",
            r"AERONIO_CLIENT_KEEPALIVE_INTERVAL_NS: client_keepalive_interval_ns 0 must",
        ),
        ("AERONIO_CLIENT_KEEPALIVE_INTERVAL_NS", "20s", r"client_keepalive_interval_ns .* less"),
        ("AERONIO_IPC_TERM_LENGHT", "65536", r"AERONIO_IPC_TERM_LENGHT: unknown .*ipc_term_lenght"),
        ("AERONIO_BOGUS", "", r"AERONIO_BOGUS"),
    ],
)
def test_env_errors_name_the_variable_and_option(var, text, expected):
    with pytest.raises(ConfigurationError, match=expected):
        DriverContext.from_sources(env={var: text, "HOME": "/root"})


def test_aeronio_variables_of_other_parts_are_not_driver_options():
    """AERONIO_CACHE is aeronio.spark's (where its JVM reader is compiled to): a driver started
    beside it takes its defaults."""
    with_it = DriverContext.from_sources(env={"AERONIO_CACHE": "/tmp/x"}, dir="/dev/shm/x")
    assert with_it == DriverContext.from_sources(env={}, dir="/dev/shm/x")


def test_unrelated_environment_variables_are_ignored():
    env = {"HOME": "/root", "AERONIOX": "1", "aeronio_ipc_mtu": "1"}
    assert DriverContext.from_sources(env=env).ipc_mtu == 1408


@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        ("x.toml", "foo = 1\n", r"config file .*x\.toml: unknown driver option 'foo'"),
        ("x.toml", "ipc_term_length = 1000\n", r"x\.toml: ipc_term_length 1000 must be a power"),
        ("x.toml", 'ipc_term_length = "96k"\n', r"x\.toml: ipc_term_length 98304 must be a power"),
        ("x.toml", "max_counters = 1.5\n", r"x\.toml: max_counters must be of type int"),
        ("x.toml", "term_buffer_sparse_file = 1\n", r"x\.toml: term_buffer_sparse_file must be"),
        ("x.toml", "[driver]\nipc_mtu = 4096\n", r"x\.toml: unknown driver option 'driver'"),
        ("x.toml", "ipc_mtu = \n", r"x\.toml: cannot read"),
        ("x.json", '{"ipc_mtu": 4096,', r"x\.json: cannot read"),
        ("x.json", "[1, 2]", r"x\.json: expected a table"),
        ("x.json", '{"publication_linger_ns": -1}', r"x\.json: publication_linger_ns must not"),
        ("x.yaml", "ipc_mtu: 4096\n", r"x\.yaml: unsupported extension"),
    ],
)
def test_file_errors_name_the_file_and_option(tmp_path, file, text, expected):
    path = write(tmp_path / file, text)
    with pytest.raises(ConfigurationError, match=expected):
        DriverContext.from_sources(config_file=path)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigurationError, match=r"config file .*nope\.toml: no such file"):
        DriverContext.from_sources(config_file=tmp_path / "nope.toml")


def test_keyword_option_errors(tmp_path):
    with pytest.raises(ConfigurationError, match="unknown driver option.*no_such"):
        DriverContext.from_sources(no_such=1)
    with pytest.raises(ConfigurationError, match="option: ipc_term_length 1000"):
        DriverContext.from_sources(ipc_term_length=1000)
    with pytest.raises(ConfigurationError, match="option: ipc_term_length .*type int.*'64k'"):
        DriverContext.from_sources(ipc_term_length="64k")  # keyword options are typed
    with pytest.raises(ConfigurationError, match="option: max_counters .*type int, not bool"):
        DriverContext.from_sources(max_counters=True)


def test_cross_option_error_blames_the_source_that_breaks_it(tmp_path):
    config = write(tmp_path / "d.toml", "ipc_mtu = 16384\n")  # fine with the default term
    with pytest.raises(ConfigurationError, match=r"AERONIO_IPC_TERM_LENGTH: ipc_mtu 16384 is"):
        DriverContext.from_sources(config_file=config, env={"AERONIO_IPC_TERM_LENGTH": "64k"})
    with pytest.raises(ConfigurationError, match=r"option: client_keepalive_interval_ns .*less"):
        DriverContext.from_sources(client_liveness_timeout_ns=100_000_000)
    # a later source repairing an earlier combination is fine: only the final result counts
    ctx = DriverContext.from_sources(
        config_file=config, env={"AERONIO_IPC_TERM_LENGTH": "64k"}, ipc_mtu=1408
    )
    assert (ctx.ipc_term_length, ctx.ipc_mtu) == (65536, 1408)


def test_from_options_is_unchanged():
    assert DriverContext.from_options(ipc_term_length=65536).ipc_term_length == 65536
    with pytest.raises(ConfigurationError, match="term_length"):
        DriverContext.from_options(ipc_term_length="64k")

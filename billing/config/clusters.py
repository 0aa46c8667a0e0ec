"""Each cluster and the store its usage is read from (Prometheus or a compatible one): how to reach it, what
its labels are called, its prices, quotas and rules, and which resources count as GPUs."""

from __future__ import annotations

import logging
import ssl
from datetime import date
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from billing.config.energy import Energy, EnergySets
from billing.config.prices import CostRecovery, Prices, PriceSets
from billing.config.quotas import Kueue, ReservedPools
from billing.config.section import ConfigError, ConfigPath, Duration, Section, check_ca_file

log = logging.getLogger(__name__)


def _check_client_certificate(cert_file: str, key_file: str) -> None:
    try:
        ssl.create_default_context().load_cert_chain(cert_file, key_file)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror
        raise ValueError(f"cert_file {cert_file} and key_file {key_file} are no usable PEM certificate and "
                         f"unencrypted key ({reason})") from None


# an HTTP header's name (RFC 9110 token); Authorization has its own keys (bearer token, basic auth)
HeaderName = Annotated[str, Field(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
HeaderValue = Annotated[str, Field(pattern=r"^[^\r\n\x00]*$")]  # a line break would start another header


class PrometheusConfig(Section):
    """How to reach one cluster's store: each cluster has its own credentials (a lab's three Prometheus servers
    rarely share a token), a CA, a client certificate, and headers such as a Mimir tenant's X-Scope-OrgID."""

    url: str = ""
    replay: ConfigPath = ""  # a directory of recorded answers instead of a live server (the demo)
    selector: str = ""
    bearer_token_env: str = ""
    bearer_token_file: ConfigPath = ""
    basic_auth_user: str = ""  # with basic_auth_password_*: HTTP basic authentication
    basic_auth_password_env: str = ""
    basic_auth_password_file: ConfigPath = ""
    ca_file: ConfigPath = ""
    cert_file: ConfigPath = ""  # with key_file: a client certificate (mutual TLS), PEM
    key_file: ConfigPath = ""  # its private key, PEM, not encrypted (a mounted Secret)
    headers: dict[HeaderName, HeaderValue] = {}  # sent with every request, e.g. {X-Scope-OrgID: lab-a}
    timeout: Duration = 120.0
    retries: Annotated[int, Field(ge=0)] = 4  # on connection errors, timeouts, 429 and 5xx, with backoff
    # queries this store answers at once, across every day a backfill bills at once (per URL: clusters on one
    # shared store share the first one's limit)
    max_queries_in_flight: Annotated[int, Field(ge=1)] = 2
    # MiB one answer may take: a run holds about 20 times an answer's size while reading it (the CronJob has 2 Gi)
    max_answer_mib: Annotated[int, Field(ge=1)] = 64
    SECRETS = ("bearer_token", "basic_auth_password")

    @model_validator(mode="after")
    def _one_source(self) -> PrometheusConfig:
        if bool(self.url) == bool(self.replay):
            raise ValueError("set exactly one of url and replay")
        return self

    @model_validator(mode="after")
    def _credentials(self) -> PrometheusConfig:
        password = self.basic_auth_password_env or self.basic_auth_password_file
        if bool(self.basic_auth_user) != bool(password):
            raise ValueError("basic auth needs both basic_auth_user and basic_auth_password_env or _file")
        if self.basic_auth_user and (self.bearer_token_env or self.bearer_token_file):
            raise ValueError("set a bearer token or basic auth, not both: each is the Authorization header")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("a client certificate needs both cert_file and key_file")
        if any(name.lower() == "authorization" for name in self.headers):
            raise ValueError("headers: set Authorization through bearer_token_* or basic_auth_*, which keep it secret")
        return self

    def check_files(self) -> None:
        """The CA bundle and client certificate can be used: read with the secrets, when a store is to be asked,
        not when the config is (`billing serve` and `report` never ask one, and their pods need not mount them)."""
        try:
            if self.ca_file:
                check_ca_file(self.ca_file)
            if self.cert_file:
                _check_client_certificate(self.cert_file, self.key_file)
        except ValueError as exc:
            raise ConfigError(f"{self._place}: {exc}") from None

    @property
    def bearer_token(self) -> str | None:
        return self.secret("bearer_token")

    @property
    def basic_auth(self) -> tuple[str, str] | None:
        password = self.secret("basic_auth_password")
        return (self.basic_auth_user, password) if password is not None else None


LabelName = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")]


class LabelNames(Section):
    """Where the cluster's scrapes put the exporters' own labels, e.g. `exported_namespace` after a scrape
    with honor_labels: false; set, it replaces billing's detection of that for every metric family."""

    namespace: LabelName = "namespace"
    pod: LabelName = "pod"
    container: LabelName = "container"
    node: LabelName = "node"


RequestRule = Literal["pod", "containers"]
# pods Pending but bound to a node (docs/spec.md "Rule 2: running"): measured and shown only, or billed as Running
BoundPendingRule = Literal["show", "charge"]


class ClusterConfig(Section):
    name: Annotated[str, Field(min_length=1)]
    prometheus: PrometheusConfig
    gpu_model_label: str = "label_nvidia_com_gpu_product"
    # node labels naming other vendors' accelerator models (AMD, Habana, TPU), tried in order on nodes
    # where gpu_model_label is absent
    vendor_model_labels: list[Annotated[str, Field(min_length=1)]] = []
    # node label of time-slicing replicas; None: the top-level gpu_replicas_label, '' none on this cluster
    gpu_replicas_label: str | None = None
    prices: PriceSets
    # unrequested capacity (allocatable that no request covered): unbilled, or shared over the teams in proportion
    # to their cost, as `unrequested-<resource>` ledger rows, so the ledger adds up to the whole cluster's price
    unrequested: Literal["unbilled", "share"] = "unbilled"
    reserved_pools: ReservedPools | None = None
    kueue: Kueue | None = None  # ClusterQueues' quotas billed as reserved capacity
    recover: CostRecovery | None = None  # None: charges stay what the prices make them
    label_names: LabelNames | None = None
    # what a pod's request is (docs/spec.md rule 3): what the scheduler reserves for it (pod), or its app
    # containers' requests only (containers, the older rule); None: the top-level `requests`
    requests: RequestRule | None = None
    # what pods Pending but bound to a node held: shown beside the bill, or charged as Running; None: the top level's
    bound_pending: BoundPendingRule | None = None
    # electricity's price and carbon intensity (docs/spec.md "Energy and carbon"); set, the cluster's energy is read
    energy: EnergySets | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_name_of_unrequested(cls, data: Any) -> Any:
        """`idle`, the old name of `unrequested`, is still read, with a warning: configs written before the rename
        bill the same."""
        if not isinstance(data, dict) or "idle" not in data:
            return data
        if "unrequested" in data:
            raise ValueError("idle is the old name of unrequested; keep only unrequested")
        log.warning("cluster %s: config key idle is now called unrequested; it is still read, but rename it "
                    "(unrequested: %s)", data.get("name"), data["idle"])
        return {("unrequested" if key == "idle" else key): value for key, value in data.items()}

    @model_validator(mode="after")
    def _pools_or_quotas(self) -> ClusterConfig:
        if self.kueue is not None and self.reserved_pools is not None:
            raise ValueError("reserved_pools and kueue are both set: a cluster has one or the other (a pod on a "
                             "pool's node would be credited twice)")
        if self.kueue is not None and self.unrequested == "share":
            raise ValueError("kueue and unrequested: share are both set: a quota's owner pays its idle quota, so "
                             "sharing what no pod requested would charge it twice; keep unrequested: unbilled")
        return self

    @field_validator("prices", "energy")
    @classmethod
    def _sets_go_forward(cls, prices: Any) -> Any:
        if isinstance(prices, list):
            if not prices:
                raise ValueError("give at least one set")
            for number, (before, after) in enumerate(zip(prices, prices[1:]), start=1):
                if after.from_ <= before.from_:
                    raise ValueError(f"[{number}].from {after.from_} is not after [{number - 1}].from {before.from_}: "
                                     "each set starts on a later day than the one before")
        return prices

    def prices_on(self, day: date) -> Prices:
        """The price set in force on `day`: the one set, or the dated set with the latest `from` on or before it; with
        the `energy.price_kwh` in force then as its `energy_kwh`."""
        prices = self.prices if isinstance(self.prices, Prices) else self._in_force(self.prices, day, "prices")
        energy = self.energy_on(day)
        return prices if energy is None else prices.with_energy(energy.price_kwh)

    def energy_on(self, day: date) -> Energy | None:
        """The energy set in force on `day`; None for a cluster without `energy`, whose energy is not read."""
        if not isinstance(self.energy, list):
            return self.energy
        return self._in_force(self.energy, day, "energy")

    def _in_force(self, sets: list[Any], day: date, key: str) -> Any:
        """Of dated sets, the one with the latest `from` on or before `day`."""
        in_force = [dated for dated in sets if dated.from_ <= day]
        if not in_force:
            raise ConfigError(f"{self._place}.{key}: no {'price ' if key == 'prices' else key + ' '}set is in force on "
                              f"{day}; the first is from {sets[0].from_}")
        return in_force[-1]

    def prices_key(self, day: date) -> str:
        """Where the price set in force on `day` is in the file, for messages: `clusters[0].prices[1]`."""
        if isinstance(self.prices, Prices):
            return self.key("prices")
        return self.key(f"prices[{sum(prices.from_ <= day for prices in self.prices) - 1}]")

    def price_changes(self, first: date, last: date) -> list[date]:
        """Days after `first`, up to `last`, on which another price set comes into force."""
        return [] if isinstance(self.prices, Prices) else [p.from_ for p in self.prices if first < p.from_ <= last]


def _gpu_fraction(name: str, value: object) -> float:
    """Physical GPUs one unit of a resource stands for: `1/7`, `0.5` or 1; exact until the final float."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{name}: expected a fraction like 1/7 or a number, got {value!r}")
    try:
        fraction = Fraction(str(value).strip()) if isinstance(value, str) else Fraction(value)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise ValueError(f"{name}: expected a fraction like 1/7 or a number, got {value!r}") from None
    if not 0 < fraction <= 1:
        # more than one GPU per unit is no sharing scheme any vendor has; it is a typo (17 for 1/7)
        raise ValueError(f"{name}: one unit stands for more than 0 and at most 1 physical GPU, got {value!r}")
    return float(fraction)


def _gpu_fractions(value: object) -> dict[str, float]:
    """The list form (each name a whole GPU) or the mapping form of gpu_resources."""
    if isinstance(value, list):
        if not all(isinstance(name, str) and name for name in value):
            raise ValueError("expected resource names like nvidia_com_gpu")
        value = {name: 1 for name in value}
    if not isinstance(value, dict):
        raise ValueError("expected a list of resource names or a mapping of resource name to GPUs per unit")
    if not value:
        raise ValueError("name at least one GPU resource")
    fractions = {str(name): _gpu_fraction(str(name), fraction) for name, fraction in value.items()}
    fractions.setdefault(DRA_GPU, 1.0)
    return fractions


# GPUs held through Dynamic Resource Allocation (docs/spec.md "GPUs through DRA"), in no request series: billed as
# this resource, named as kube-state-metrics would name NVIDIA's DRA driver (gpu.nvidia.com); always a GPU resource
DRA_GPU = "gpu_nvidia_com"


GpuFractions = Annotated[dict[str, float], BeforeValidator(_gpu_fractions)]

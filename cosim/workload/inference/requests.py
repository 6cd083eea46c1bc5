"""Request streams of an inference service: arrival time, prompt tokens, output tokens per request.

Two sources, same result (:class:`Requests`, columns sorted by arrival):

- :func:`poisson_requests`: a seeded Poisson process of rate ``rate_per_s`` (exponential inter-arrival
  times) with log-normal prompt and output lengths of given medians and log-space sigmas, clipped to
  [1, max]; same seed, same requests bit for bit (numpy PCG64).
- :func:`read_request_csv`: a trace ``arrived_at,num_prefill_tokens,num_decode_tokens`` (arrival in
  seconds from the start; one header line), the format of public Splitwise-style request traces.
  ``num_decode_tokens`` counts every output token, the first one (made by the prefill) included.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim.errors import CosimInputError

CSV_HEADER = "arrived_at,num_prefill_tokens,num_decode_tokens"


@dataclass(frozen=True, slots=True, eq=False)
class Requests:
    """Requests in arrival order: ``arrival_ns`` float64, ``prompt_tokens`` and ``output_tokens`` int64."""

    arrival_ns: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self) -> None:
        a = np.asarray(self.arrival_ns, np.float64)
        p = np.asarray(self.prompt_tokens, np.int64)
        o = np.asarray(self.output_tokens, np.int64)
        if not (a.shape == p.shape == o.shape) or a.ndim != 1:
            raise CosimInputError("requests", "arrival, prompt and output columns differ in length")
        if a.size and (not np.all(np.isfinite(a)) or a.min() < 0 or np.any(np.diff(a) < 0)):
            raise CosimInputError("requests.arrived_at", "arrivals must be finite, >= 0 and non-decreasing",
                                  "sort the trace by arrival time")
        if a.size and (p.min() < 1 or o.min() < 1):
            raise CosimInputError("requests.num_prefill_tokens", "every request needs >= 1 prompt and output token")
        for name, arr in (("arrival_ns", a), ("prompt_tokens", p), ("output_tokens", o)):
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    @property
    def n(self) -> int:
        """Number of requests."""
        return int(self.arrival_ns.size)


#: requests of a Poisson source that does not say how many
POISSON_REQUESTS = 16


def poisson_requests(n: int, rate_per_s: float, *, seed: int, prompt_median_tokens: float = 1000.0,
                     prompt_sigma: float = 1.0, output_median_tokens: float = 50.0, output_sigma: float = 1.0,
                     max_prompt_tokens: int = 8192, max_output_tokens: int = 1024) -> Requests:
    """``n`` requests of a Poisson process of ``rate_per_s`` starting at 0 (first arrival at 0 as in the
    public traces), log-normal lengths (module docstring)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise CosimInputError("workload.requests", f"must be an integer >= 1, got {n!r}")
    if not np.isfinite(rate_per_s) or rate_per_s <= 0:
        raise CosimInputError("workload.rate_per_s", f"must be > 0, got {rate_per_s!r}")
    rng = np.random.default_rng(seed)
    gaps_ns = rng.exponential(1e9 / rate_per_s, n)
    arrival = np.concatenate([[0.0], np.cumsum(gaps_ns[1:])])
    def lengths(median, sigma, top):
        x = np.rint(median * np.exp(sigma * rng.standard_normal(n)))
        return np.clip(x, 1, top).astype(np.int64)
    return Requests(arrival, lengths(prompt_median_tokens, prompt_sigma, max_prompt_tokens),
                    lengths(output_median_tokens, output_sigma, max_output_tokens))


def read_request_csv(path: str | Path, *, limit: int | None = None) -> Requests:
    """The requests of a CSV trace (module docstring); ``limit``: the first ``limit`` rows only."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CosimInputError(str(path), f"cannot read the request trace ({exc})") from None
    lines = text.splitlines()
    if not lines or lines[0].strip().replace(" ", "") != CSV_HEADER:
        raise CosimInputError(str(path), f"the first line must be the header {CSV_HEADER!r}")
    rows = [ln for ln in lines[1:] if ln.strip()][:limit]
    try:
        data = np.array([[float(x) for x in ln.split(",")] for ln in rows], np.float64).reshape(-1, 3)
    except ValueError:
        raise CosimInputError(str(path), "every row needs three numbers: seconds, prompt tokens, output tokens") \
            from None
    if data.size and np.any(data[:, 1:] != np.rint(data[:, 1:])):
        raise CosimInputError(str(path), "token counts must be whole numbers")
    try:
        return Requests(data[:, 0] * 1e9, data[:, 1].astype(np.int64), data[:, 2].astype(np.int64))
    except CosimInputError as exc:
        raise CosimInputError(str(path), exc.problem, exc.fix) from None


def request_csv_text(req: Requests) -> str:
    """``req`` as a CSV trace (seconds with ns resolution), readable by :func:`read_request_csv`."""
    rows = [f"{a / 1e9:.9f},{p},{o}" for a, p, o in zip(req.arrival_ns, req.prompt_tokens, req.output_tokens)]
    return "\n".join([CSV_HEADER, *rows]) + "\n"


def offered_load(req: Requests) -> dict[str, float]:
    """Mean arrival rate (requests/s) and mean prompt and output lengths (tokens) of ``req``."""
    span_s = float(req.arrival_ns[-1] - req.arrival_ns[0]) / 1e9 if req.n > 1 else 0.0
    return {"rate_per_s": (req.n - 1) / span_s if span_s > 0 else float("nan"),
            "prompt_mean_tokens": float(req.prompt_tokens.mean()),
            "output_mean_tokens": float(req.output_tokens.mean())}


def sample_requests() -> Requests:
    """The 64-request sample shipped with cosim (``data/sample_requests.csv``, generated by
    ``poisson_requests(64, 20.0, seed=7, prompt_median_tokens=1200, output_median_tokens=40)``)."""
    return read_request_csv(Path(__file__).parent / "data" / "sample_requests.csv")

from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy
import numpy.typing as npt

CSV_COLUMNS: List[str]
TRACK_COLUMNS: List[str]

class Components(NamedTuple):
    n: int
    stats: Any
    centroids: Any
    sums: Any
    subpixel: Any

def connected_components_with_stats(
    image: Any,
    connectivity: int = 8,
    *,
    ltype: Any = numpy.int32,
    backend: str = "auto",
    algorithm: Optional[str] = None,
) -> Tuple[int, Any, Any, Any]: ...
def component_stats(
    image: Any,
    connectivity: int = 8,
    *,
    grey: Any = None,
    level: Optional[int] = None,
    invert: bool = False,
    backend: str = "auto",
    algorithm: Optional[str] = None,
) -> Components: ...
def threshold(
    grey: npt.NDArray[numpy.uint8], spec: str = "otsu", invert: bool = False
) -> Tuple[Optional[int], npt.NDArray[numpy.uint8]]: ...
def algorithms() -> List[Dict[str, Any]]: ...
def devices() -> List[Dict[str, Any]]: ...

class Analysis:
    source: str
    algorithm: str
    notices: List[str]
    last: Optional[Tuple[int, float, str]]
    def __iter__(self) -> Iterator[Any]: ...
    def __next__(self) -> Any: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Analysis": ...
    def __exit__(self, *exc: Any) -> None: ...

def analyze(
    source: str,
    *,
    connectivity: int = 8,
    threshold: Optional[str] = None,
    invert: bool = False,
    backend: str = "auto",
    algorithm: Optional[str] = None,
    max_frames: Optional[int] = None,
    size: Optional[Tuple[int, int]] = None,
    subpixel: bool = True,
    pandas: bool = False,
) -> Analysis: ...

class Tracker:
    active: int
    def __init__(
        self,
        gate: float = 20.0,
        gate_growth: float = 3.0,
        max_missed: int = 30,
        tentative_max_missed: int = 2,
        max_candidates: int = 16,
        size_weight: float = 0.5,
        velocity_smoothing: float = 0.5,
    ) -> None: ...
    def update(
        self,
        x: npt.NDArray[numpy.float64],
        y: npt.NDArray[numpy.float64],
        area: Optional[npt.NDArray[numpy.float64]] = None,
        frame: Optional[int] = None,
    ) -> npt.NDArray[numpy.int64]: ...
    def summaries(self) -> Dict[str, npt.NDArray[Any]]: ...

import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy
import numpy.typing as npt

__version__: str
CSV_COLUMNS: List[str]
TRACK_COLUMNS: List[str]
DICTIONARIES: List[str]
CC_STAT_LEFT: int
CC_STAT_TOP: int
CC_STAT_WIDTH: int
CC_STAT_HEIGHT: int
CC_STAT_AREA: int
CV_16U: int
CV_32S: int

class GpuUnavailableError(RuntimeError, ValueError): ...

class Components(NamedTuple):
    n: int
    stats: Any
    centroids: Any
    sums: Any
    subpixel: Any

def connected_components_with_stats(
    image: Any,
    connectivity: int = 8,
    ltype: Any = numpy.int32,
    *,
    backend: str = "auto",
    algorithm: Optional[str] = None,
    stats_dtype: Any = numpy.int32,
) -> Tuple[int, Any, Any, Any]: ...
def connected_components(
    image: Any,
    connectivity: int = 8,
    ltype: Any = numpy.int32,
    *,
    backend: str = "auto",
    algorithm: Optional[str] = None,
) -> Tuple[int, Any]: ...
def component_stats(
    image: Any,
    connectivity: int = 8,
    *,
    grey: Any = None,
    level: Optional[float] = None,
    invert: bool = False,
    backend: str = "auto",
    algorithm: Optional[str] = None,
    stats_dtype: Any = numpy.int32,
) -> Components: ...
def detect_markers(
    image: Any,
    dictionary: Any = "DICT_APRILTAG_36h11",
    *,
    backend: str = "auto",
    refine: bool = True,
    parameters: Optional[Dict[str, float]] = None,
    return_dictionaries: bool = False,
) -> Any: ...
def generate_marker(
    dictionary: Any, id: int, size: int, border_bits: int = 1
) -> npt.NDArray[numpy.uint8]: ...
def estimate_pose(
    corners: Any, marker_length: float, camera_matrix: Any, dist_coeffs: Any = None
) -> Tuple[npt.NDArray[numpy.float64], npt.NDArray[numpy.float64]]: ...
def threshold(
    grey: Any, spec: str = "otsu", invert: bool = False
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
    source: Union[str, os.PathLike[str], npt.NDArray[Any], Iterator[Any], Sequence[Any]],
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
    shapes: bool = False,
    min_area: Optional[int] = None,
    max_area: Optional[int] = None,
    max_aspect: Optional[float] = None,
    min_circularity: Optional[float] = None,
    max_circularity: Optional[float] = None,
    min_inertia_ratio: Optional[float] = None,
    max_inertia_ratio: Optional[float] = None,
    masks: Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]]] = (),
    world_points: Sequence[Any] = (),
    calibration: Optional[Union[str, os.PathLike[str]]] = None,
    world_units: str = "",
    decoder: str = "auto",
) -> Analysis: ...

def analyze_to_file(
    source: Union[str, os.PathLike[str]],
    out: Union[str, os.PathLike[str]],
    *,
    tracks: Optional[Union[str, os.PathLike[str]]] = None,
    metadata: Optional[Dict[str, str]] = None,
    **options: Any,
) -> Dict[str, Any]: ...

class Tracker:
    active: int
    greedy_clusters: int
    def __init__(
        self,
        gate: float = 20.0,
        gate_growth: float = 3.0,
        max_missed: int = 30,
        tentative_max_missed: int = 2,
        max_candidates: int = 16,
        size_weight: float = 0.5,
        velocity_smoothing: float = 0.5,
        predict: bool = True,
        link_strategy: str = "greedy",
    ) -> None: ...
    def update(
        self,
        x: npt.ArrayLike,
        y: npt.ArrayLike,
        area: Optional[npt.ArrayLike] = None,
        frame: Optional[int] = None,
    ) -> npt.NDArray[numpy.int64]: ...
    def summaries(self) -> Dict[str, npt.NDArray[Any]]: ...

FEATURE_COLUMNS: List[str]

def link(
    features: Any,
    search_range: Union[float, Tuple[float, float]],
    memory: int = 0,
    *,
    pos_columns: Optional[Sequence[str]] = None,
    t_column: str = "frame",
    predict: bool = False,
    max_candidates: int = 16,
    link_strategy: str = "subnet",
    **kwargs: Any,
) -> Any: ...
def locate_frames(
    frames: Union[str, os.PathLike[str], npt.NDArray[Any], Iterator[Any], Sequence[Any]],
    threshold: Optional[str] = None,
    *,
    invert: bool = False,
    connectivity: int = 8,
    minmass: Optional[float] = None,
    max_frames: Optional[int] = None,
    backend: str = "auto",
) -> Any: ...

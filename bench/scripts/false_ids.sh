#!/usr/bin/env bash
# No false ID: markers looked for in N frames of the clutter scene (`synthetic:random`, 1080p)
# and in N frames made from natural photographs (scikit-image's, none with a marker: scaled,
# turned, gamma and noise, 1280×720 JPEG), by the GPU detector; OpenCV's ArucoDetector on the
# same photographs for comparison. From the repository root of the GPU machine:
#
#   bash bench/scripts/false_ids.sh      # DEVICE (.device): the binary; N (10000); DICTS;
#                                        # SKIP_CLUTTER=1 for the photographs only
# Needs python3 with numpy, OpenCV (cv2.aruco) and scikit-image; scratch files under /tmp.
set -u
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
DEVICE="${DEVICE:-.device}"
B="$PWD/$DEVICE/markerscope"
if [ -d "$DEVICE/fflib" ]; then
    export LD_LIBRARY_PATH="$PWD/$DEVICE/fflib"
fi
N=${N:-10000}
DICTS=${DICTS:-DICT_4X4_50,DICT_APRILTAG_36h11,DICT_6X6_250}
start=$(date +%s)
if [ -z "${SKIP_CLUTTER:-}" ]; then
    "$B" analyze synthetic:random --size 1920x1080 --max-frames $N --markers $DICTS --backend cuda --out /tmp/clutter.csv 2>&1 | tail -2
    echo "clutter: $N frames, marker rows: $(( $(wc -l < /tmp/clutter.csv) - 1 )) ($(( $(date +%s) - start )) s)"
fi
python3 - "$N" <<'PY'
import sys, os, numpy as np, cv2
from skimage import data
n = int(sys.argv[1]); out = "/tmp/photos"; os.makedirs(out, exist_ok=True)
names = ["astronaut", "camera", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry",
         "moon", "page", "text", "coins", "brick", "grass", "gravel", "horse", "retina", "colorwheel", "cell",
         "human_mitosis", "logo", "clock", "microaneurysms", "motorcycle_left", "motorcycle_right", "binary_blobs",
         "checkerboard", "shepp_logan_phantom", "cat", "eagle", "kidney", "lily", "skin"]
photos = []
for name in names:
    try:
        im = np.asarray(getattr(data, name)())
    except Exception:
        continue
    if im.ndim == 3 and im.shape[-1] in (3, 4):
        im = cv2.cvtColor(im[..., :3].astype(np.uint8), cv2.COLOR_RGB2GRAY)
    if im.ndim != 2:
        continue
    im = im.astype(np.float64)
    im = (255 * (im - im.min()) / max(np.ptp(im), 1e-9)).astype(np.uint8)
    photos.append((name, im))
print("photographs:", len(photos), [p[0] for p in photos])
W, H = 1280, 720
def make(k):
    rng = np.random.default_rng(k)
    name, im = photos[k % len(photos)]
    s = rng.uniform(0.6, 3.0) * max(W / im.shape[1], H / im.shape[0])
    a = rng.uniform(-180, 180)
    M = cv2.getRotationMatrix2D((im.shape[1] / 2, im.shape[0] / 2), a, s)
    M[0, 2] += W / 2 - im.shape[1] / 2; M[1, 2] += H / 2 - im.shape[0] / 2
    f = cv2.warpAffine(im, M, (W, H), borderMode=cv2.BORDER_REFLECT)
    g = rng.uniform(0.6, 1.6)
    f = np.clip(255 * (f / 255.0) ** g + rng.normal(0, rng.uniform(0, 6), f.shape), 0, 255).astype(np.uint8)
    cv2.imwrite(f"{out}/f{k:05d}.jpg", f, [cv2.IMWRITE_JPEG_QUALITY, 95])
from multiprocessing import Pool
with Pool(16) as pool:
    pool.map(make, range(n), chunksize=64)
PY
start=$(date +%s)
"$B" analyze /tmp/photos --markers $DICTS --backend cuda --out /tmp/photos.csv 2>&1 | tail -2
echo "photographs: $(ls /tmp/photos | wc -l) frames, marker rows: $(( $(wc -l < /tmp/photos.csv) - 1 )) ($(( $(date +%s) - start )) s)"
head -3 /tmp/photos.csv | cut -c1-200
python3 - "$DICTS" <<'PY'
import sys, os, cv2
from multiprocessing import Pool
names = sys.argv[1].split(",")
def count(path):
    g = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    p = cv2.aruco.DetectorParameters(); p.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
    found = 0
    for name in names:
        d = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, name))
        _, ids, _ = cv2.aruco.ArucoDetector(d, p).detectMarkers(g)
        found += 0 if ids is None else len(ids)
    return found
files = sorted(os.path.join("/tmp/photos", f) for f in os.listdir("/tmp/photos"))
with Pool(16) as pool:
    total = sum(pool.map(count, files, chunksize=64))
print(f"OpenCV ArucoDetector on the same photographs ({','.join(names)}, CORNER_REFINE_SUBPIX): {total} false IDs in {len(files)} frames")
PY

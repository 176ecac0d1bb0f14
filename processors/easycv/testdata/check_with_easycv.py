"""Checks gen_yolox.py's references against EasyCV's own YoloXPredictor.

usage: PYTHON check_with_easycv.py OUTDIR   (OUTDIR: what gen_yolox.py wrote)

Not run by the tests (EasyCV is not a test dependency); run by hand after
changing gen_yolox.py. PYTHON is a venv over Debian's torch (pip's
EasyCV pins a CUDA-era stack; installed without its dependencies it runs on
Debian's torch 1.13):

  bash scripts/python-venv.sh easycv-check   # scripts/requirements/easycv-check.txt, then
                                             # easycv-check-mmcv.txt (mmcv without its ops)
  ~/.cache/eas-server/pyvenv/easycv-check/bin/python processors/easycv/testdata/check_with_easycv.py OUTDIR

What EasyCV imports but YoloXPredictor never calls is stubbed below:
mmcv's compiled ops (3D detection), xtcocotools (keypoint metrics),
transformers (CLIP). YoloXPredictor itself, its input and output
processors, mmcv's transforms and onnxruntime are EasyCV's and mmcv's own.
Each answer ("img_metas", EasyCV's internal record, aside) must equal the
reference: keys, classes, names and shape exactly, boxes and scores under
tensor.F32Reformulated for the ONNX export (EasyCV runs it on onnxruntime,
the reference on PyTorch) and tensor.F32Accumulated for the jit export.
Scores a few ulps apart may swap places under onnxruntime, so detections
are compared in (class, box) order.
"""
import json
import sys
import types
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import mmcv.utils.ext_loader as el  # noqa: E402

el.load_ext = lambda name, funcs: types.SimpleNamespace(**{f: None for f in funcs})
for m in ["xtcocotools", "xtcocotools.coco", "xtcocotools.cocoeval", "xtcocotools.mask"]:
    sys.modules.setdefault(m, types.ModuleType(m))
sys.modules["xtcocotools.coco"].COCO = object
sys.modules["xtcocotools.cocoeval"].COCOeval = object
tf, tfm = types.ModuleType("transformers"), types.ModuleType("transformers.modeling_utils")
tfm.PreTrainedModel, tf.modeling_utils, tf.BertConfig = torch.nn.Module, tfm, object
sys.modules["transformers"], sys.modules["transformers.modeling_utils"] = tf, tfm
from easycv.predictors.detector import YoloXPredictor  # noqa: E402

TOL = {"onnx": (1e-4, 1e-5), "jit": (1e-5, 1e-6)}  # (rtol, atol): F32Reformulated, F32Accumulated

out = sys.argv[1]
refs = json.load(open(f"{out}/yolox_refs.json"))
bad = 0


def canonical(a):
    if a["detection_scores"] is None:
        return a
    idx = sorted(range(len(a["detection_scores"])), key=lambda i: (a["detection_classes"][i], a["detection_boxes"][i]))
    b = dict(a)
    for k in ["detection_boxes", "detection_scores", "detection_classes", "detection_class_names"]:
        if k in a:
            b[k] = [a[k][i] for i in idx]
    return b


for kind in ["onnx", "jit"]:
    for thresh, suffix in [(0.5, ""), (0.0, "_all")]:
        pred = YoloXPredictor(f"{out}/yolox.{kind}", score_thresh=thresh, input_processor_threads=1, device="cpu")
        for name, ref in refs["images"].items():
            got = pred([f"{out}/{name}"])[0]
            got.pop("img_metas", None)
            got = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in got.items()}
            want = ref[kind + suffix]
            got, want = canonical(got), canonical(want)
            errs = []
            if sorted(got) != sorted(want):
                errs.append(f"keys {sorted(got)} != {sorted(want)}")
            for k in ["detection_classes", "detection_class_names", "ori_img_shape"]:
                if got.get(k) != want.get(k):
                    errs.append(f"{k} differs")
            rtol, atol = TOL[kind]
            for k in ["detection_boxes", "detection_scores"]:
                g = np.array(got[k] if got[k] is not None else [], dtype=np.float64)
                w = np.array(want[k] if want[k] is not None else [], dtype=np.float64)
                if g.shape != w.shape:
                    errs.append(f"{k} shape {g.shape} != {w.shape}")
                elif w.size and (np.abs(g - w) > atol + rtol * np.abs(w).max()).any():
                    errs.append(f"{k} out of tolerance")
            n = len(got["detection_scores"] or [])
            print(f"{kind} score_thresh {thresh} {name}: {n} detections, {'OK' if not errs else '; '.join(errs)}")
            bad += bool(errs)
sys.exit(1 if bad else 0)

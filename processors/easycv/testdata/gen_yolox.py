"""Writes the easycv processor's YOLOX test exports, images and references.

usage: gen_yolox.py OUTDIR

EasyCV (PyPI pai-easycv) is not a test dependency (it pins a CUDA-era stack
and mmcv), so this script reimplements, from EasyCV's public source
(easycv/predictors/detector.py: YoloXPredictor, YoloXOutputProcessor,
DetOutputProcessor; easycv/models/detection/utils/postprocess.py:
postprocess; easycv/apis/export.py: _export_yolox; easycv/datasets:
LoadImage, MMResize, MMPad, MMNormalize; mmcv's imrescale, impad,
imnormalize), what YoloXPredictor does to one image, with the real
libraries it calls: PIL to decode, OpenCV (python3-opencv) to resize and
normalise, torch for the network, torchvision's batched_nms for NMS.
check_with_easycv.py runs EasyCV's own YoloXPredictor (pai-easycv 0.11.7,
on onnxruntime and libtorch) on what this script writes and checks these
references against it.

Everything is generated here (seeded; nothing downloaded):

  yolox.onnx, yolox.onnx.config.json  a small YOLOX-shaped detector (three
      strides, decoded [N, A, 5 + classes] output) exported as EasyCV's
      export_type 'onnx' does (torch.onnx.export, opset 12, input "input",
      output "output"), with the config EasyCV writes beside it (model,
      export, test_pipeline, classes).
  yolox.jit, yolox.jit.config.json  the same network traced with its
      postprocess (class-aware NMS through torchvision's batched_nms), as
      export_type 'jit' does: forward returns one [K, 7] tensor per image.
  yolox_raw.jit (+ config)  the network traced without postprocess (what a
      blade export or a model whose head does not decode in inference
      returns: the [N, A, 5 + classes] predictions), served with NMS in Go.
  det_*.png, det_*.jpg  test images.
  yolox_refs.json  per image: the preprocessed float32 tensor's sha256, the
      resized uint8 image, the network's raw output, and YoloXPredictor's
      answer for the onnx and jit exports (also with score_thresh 0: every
      detection NMS keeps); and cv2.resize cases.
"""
import base64
import hashlib
import json
import os
import sys

import cv2
import numpy as np
import torch
import torchvision
from PIL import Image

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(11)
torch.set_num_threads(1)
cv2.setNumThreads(1)

CLASSES = ["person", "bicycle", "car"]
NC = len(CLASSES)
IMG_SCALE = (160, 160)
TEST_CONF, NMS_THRE, SCORE_THRESH = 0.01, 0.65, 0.5
NORM = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)
MODEL_CFG = dict(type="YOLOX", test_conf=TEST_CONF, nms_thre=NMS_THRE, backbone="CSPDarknet", model_type="s",
                 head=dict(type="YOLOXHead", model_type="s", num_classes=NC, decode_in_inference=True))
TEST_PIPELINE = [
    dict(type="MMResize", img_scale=list(IMG_SCALE), keep_ratio=True),
    dict(type="MMPad", pad_to_square=True, pad_val=[114.0, 114.0, 114.0]),
    dict(type="MMNormalize", **NORM),
    dict(type="DefaultFormatBundle"),
    dict(type="Collect", keys=["img"]),
]


class TinyYOLOX(torch.nn.Module):
    """Three feature levels (strides 8, 16, 32) and YOLOX's decoded head
    output: per anchor (cx, cy, w, h, sigmoid(obj), sigmoid(cls)...)."""

    def __init__(self):
        super().__init__()
        c = torch.nn
        self.stem = c.Sequential(c.Conv2d(3, 8, 3, 2, 1), c.BatchNorm2d(8), c.SiLU(),
                                 c.Conv2d(8, 16, 3, 2, 1), c.SiLU(), c.Conv2d(16, 16, 3, 2, 1), c.SiLU())
        self.down1 = c.Sequential(c.Conv2d(16, 16, 3, 2, 1), c.SiLU())
        self.down2 = c.Sequential(c.Conv2d(16, 16, 3, 2, 1), c.SiLU())
        self.heads = c.ModuleList([c.Conv2d(16, 5 + NC, 1) for _ in range(3)])
        self.strides = [8, 16, 32]

    def forward(self, x):
        f8 = self.stem(x)
        f16 = self.down1(f8)
        f32 = self.down2(f16)
        outs, grids, strides = [], [], []
        for f, head, s in zip([f8, f16, f32], self.heads, self.strides):
            o = head(f)
            o = torch.cat([o[:, :4], o[:, 4:].sigmoid()], 1)
            b, _, h, w = o.shape
            outs.append(o.flatten(2))
            yv, xv = torch.meshgrid([torch.arange(h), torch.arange(w)], indexing="ij")
            grids.append(torch.stack((xv, yv), 2).view(1, -1, 2))
            strides.append(torch.full((1, h * w, 1), s))
        o = torch.cat(outs, 2).permute(0, 2, 1)
        grid = torch.cat(grids, 1).to(o.dtype)
        stride = torch.cat(strides, 1).to(o.dtype)
        return torch.cat([(o[..., :2] + grid) * stride, torch.exp(o[..., 2:4]) * stride, o[..., 4:]], -1)


def postprocess(prediction, num_classes, conf_thre, nms_thre):
    """EasyCV's postprocess: centre boxes to corners, best class, keep
    obj * class >= conf_thre, class-aware NMS (torchvision batched_nms);
    per image None or [K, 7] (x1, y1, x2, y2, obj, class_conf, class)."""
    corners = torch.stack([prediction[:, :, 0] - prediction[:, :, 2] / 2, prediction[:, :, 1] - prediction[:, :, 3] / 2,
                           prediction[:, :, 0] + prediction[:, :, 2] / 2, prediction[:, :, 1] + prediction[:, :, 3] / 2], -1)
    prediction = torch.cat([corners, prediction[:, :, 4:]], -1)
    output = []
    for pred in prediction:
        conf, cls = torch.max(pred[:, 5:5 + num_classes], 1, keepdim=True)
        keep = (pred[:, 4] * conf.squeeze() >= conf_thre).squeeze()
        det = torch.cat((pred[:, :5], conf, cls.float()), 1)[keep]
        if not det.numel():
            output.append(None)
            continue
        idx = torchvision.ops.batched_nms(det[:, :4], det[:, 4] * det[:, 5], det[:, 6], nms_thre)
        output.append(det[idx])
    return output


class Exported(torch.nn.Module):
    """export_type 'jit': the network with its postprocess traced in."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, img):
        return postprocess(self.net(img), NC, TEST_CONF, NMS_THRE)


net = TinyYOLOX().eval()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.randn_like(p) * 0.25)
    net.stem[1].running_mean.copy_(torch.randn(8) * 0.1)
    net.stem[1].running_var.copy_(torch.rand(8) + 0.5)
    for head in net.heads:
        head.weight.mul_(0.8)
        head.bias[:2] = 0
        head.bias[2:4] = 2.0  # boxes about 7 strides wide: neighbours overlap, so NMS has work
        head.bias[4] = -0.3
        head.bias[5:] = torch.tensor([0.6, 0.3, 0.0])[:NC]

dummy = 255 * torch.rand((1, 3) + IMG_SCALE)
torch.onnx.export(net, dummy, os.path.join(out, "yolox.onnx"), export_params=True, opset_version=12,
                  do_constant_folding=True, input_names=["input"], output_names=["output"])
with torch.no_grad():
    jit = torch.jit.trace(Exported(net).eval(), dummy, check_trace=False)
    jit.save(os.path.join(out, "yolox.jit"))
    raw = torch.jit.trace(net, dummy)
    raw.save(os.path.join(out, "yolox_raw.jit"))
export_cfg = dict(export_type="onnx", preprocess_jit=False, batch_size=1, use_trt_efficientnms=False)
for name, et in [("yolox.onnx", "onnx"), ("yolox.jit", "jit"), ("yolox_raw.jit", "jit")]:
    with open(os.path.join(out, name + ".config.json"), "w") as f:
        json.dump(dict(model=MODEL_CFG, export=dict(export_cfg, export_type=et), test_pipeline=TEST_PIPELINE,
                       classes=CLASSES), f)


def picture(w, h, seed):
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1), (x * 3 + y) % 256], -1)
    base = base + 60 * np.sin(x / 9.0)[..., None] * np.cos(y / 13.0)[..., None] + r.normal(0, 20, (h, w, 3))
    # a few solid blocks: objects for the detector to fire on
    for _ in range(4):
        x0, y0 = r.integers(0, w - 8), r.integers(0, h - 8)
        base[y0:y0 + r.integers(8, max(9, h // 3)), x0:x0 + r.integers(8, max(9, w // 3))] = r.integers(0, 256, 3)
    return np.clip(base, 0, 255).astype(np.uint8)


images = {
    "det_640x480.png": Image.fromarray(picture(640, 480, 1), "RGB"),
    "det_300x500.png": Image.fromarray(picture(300, 500, 2), "RGB"),
    "det_120x90.png": Image.fromarray(picture(120, 90, 3), "RGB"),  # upscaled
    "det_320x320.png": Image.fromarray(picture(320, 320, 4), "RGB"),  # exactly 2x: OpenCV's area path
    "det_gray_200x150.png": Image.fromarray(picture(200, 150, 5)[..., 1], "L"),
    "det_photo_400x300.jpg": Image.fromarray(picture(400, 300, 6), "RGB"),
}
for name, im in images.items():
    im.save(os.path.join(out, name), **({"quality": 92} if name.endswith(".jpg") else {}))


def load_image(path):
    """EasyCV's load_image (pillow backend, mode BGR)."""
    im = Image.open(path)
    if im.mode.upper() != "RGB":
        im = im.convert("RGB")
    return cv2.cvtColor(np.asarray(im, dtype=np.uint8), cv2.COLOR_RGB2BGR)


def preprocess(img):
    """MMResize(keep_ratio) + MMPad(pad_to_square, 114) + MMNormalize, as
    mmcv's imrescale (cv2 backend, bilinear), impad and imnormalize do."""
    h, w = img.shape[:2]
    long_edge, short_edge = max(IMG_SCALE), min(IMG_SCALE)
    scale = min(long_edge / max(h, w), short_edge / min(h, w))
    nw, nh = int(w * float(scale) + 0.5), int(h * float(scale) + 0.5)
    resized = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    w_scale = np.float32(nw / w)
    side = max(nh, nw)
    padded = np.full((side, side, 3), 114, dtype=np.uint8)
    padded[:nh, :nw] = resized
    x = padded.astype(np.float32)
    mean = np.float64(np.array(NORM["mean"], dtype=np.float32).reshape(1, -1))
    stdinv = 1 / np.float64(np.array(NORM["std"], dtype=np.float32).reshape(1, -1))
    cv2.cvtColor(x, cv2.COLOR_BGR2RGB, x)
    cv2.subtract(x, mean, x)
    cv2.multiply(x, stdinv, x)
    return resized, x.transpose(2, 0, 1).copy(), w_scale


def answer(dets, w_scale, ori_shape, score_thresh=SCORE_THRESH):
    """YoloXOutputProcessor.post_assign + DetOutputProcessor.process_single
    for one image: boxes / scale_factor[0], scores obj * class, the score
    filter, class names, ori_img_shape."""
    if dets is None:
        res = {"detection_boxes": None, "detection_scores": None, "detection_classes": None}
    else:
        boxes = dets[:, 0:4].clone()
        boxes /= w_scale
        res = {"detection_boxes": boxes.numpy(), "detection_scores": (dets[:, 4] * dets[:, 5]).numpy(),
               "detection_classes": dets[:, 6].numpy().astype(np.int32)}
        if len(res["detection_scores"]) >= 1:
            if score_thresh > 0:
                k = res["detection_scores"] > score_thresh
                for key in res:
                    res[key] = res[key][k]
            res["detection_class_names"] = [CLASSES[int(c)] for c in res["detection_classes"]]
    res["ori_img_shape"] = list(ori_shape[:2])
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in res.items()}


def margins(pred):
    """How close the reference comes to a threshold: the answer flips there
    under float rounding, so the test inputs must stay clear of them. The
    scores against test_conf and score_thresh; the IoU of each kept box with
    every lower-scored candidate of its class against nms_thre."""
    p = postprocess(pred.clone(), NC, 0.0, 2.0)[0]  # every anchor, no suppression
    s = p[:, 4] * p[:, 5]
    m = min(float((s - TEST_CONF).abs().min()), float((s - SCORE_THRESH).abs().min()))
    kept = postprocess(pred.clone(), NC, TEST_CONF, NMS_THRE)[0]
    cand = p[s >= TEST_CONF]
    cs = cand[:, 4] * cand[:, 5]
    for k in kept:
        ks = k[4] * k[5]
        mask = (cand[:, 6] == k[6]) & (cs < ks)
        if mask.any():
            iou = torchvision.ops.box_iou(k[None, :4], cand[mask][:, :4])[0]
            m = min(m, float((iou - NMS_THRE).abs().min()))
    return m


refs = {"classes": CLASSES, "img_scale": list(IMG_SCALE), "images": {}, "resize": []}
for name in images:
    img = load_image(os.path.join(out, name))
    resized, x, w_scale = preprocess(img)
    with torch.no_grad():
        pred = net(torch.from_numpy(x)[None])
        jit_out = jit(torch.from_numpy(x)[None])
    dets = postprocess(pred.clone(), NC, TEST_CONF, NMS_THRE)[0]
    m = margins(pred)
    if m < 1e-5:
        raise SystemExit(f"{name}: a score or IoU is {m} from a threshold; change the seed")
    onnx_ans = answer(dets, w_scale, img.shape)
    jit_ans = answer(jit_out[0], w_scale, img.shape)
    refs["images"][name] = {
        "resized_w": resized.shape[1], "resized_h": resized.shape[0],
        "resized_rgb": base64.b64encode(cv2.cvtColor(resized, cv2.COLOR_BGR2RGB).tobytes()).decode(),
        "tensor_sha256": hashlib.sha256(x.astype("<f4").tobytes()).hexdigest(),
        "pred_shape": list(pred.shape), "pred": pred.flatten().tolist(),
        "onnx": onnx_ans, "jit": jit_ans, "margin": m,
        # score_thresh 0: every detection NMS keeps
        "onnx_all": answer(dets, w_scale, img.shape, 0.0), "jit_all": answer(jit_out[0], w_scale, img.shape, 0.0),
    }

# cv2.resize alone (INTER_LINEAR on 3-channel uint8): up, down, one axis,
# exactly half (OpenCV's area path), sizes around its SIMD widths.
src = picture(37, 23, 9)
big = picture(200, 120, 10)
for (img, w, h) in [(src, 37, 23), (src, 11, 7), (src, 80, 50), (src, 36, 46), (src, 5, 23), (src, 37, 3), (src, 1, 1),
                    (src, 200, 9), (big, 100, 60), (big, 160, 96), (big, 33, 20), (big, 199, 119), (big, 400, 240),
                    (big, 6, 11), (big, 101, 61)]:
    got = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
    refs["resize"].append({"src": "small" if img is src else "big", "w": w, "h": h,
                           "out": base64.b64encode(got.tobytes()).decode()})
refs["resize_src"] = {"small": [37, 23, base64.b64encode(src.tobytes()).decode()],
                      "big": [200, 120, base64.b64encode(big.tobytes()).decode()]}

with open(os.path.join(out, "yolox_refs.json"), "w") as f:
    json.dump(refs, f)

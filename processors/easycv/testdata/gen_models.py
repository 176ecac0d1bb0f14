"""Writes the easycv processor's test models, images and references.

usage: gen_models.py OUTDIR

Everything is generated here (seeded; nothing downloaded) with Debian's
python3-torch, python3-torchvision and python3-pil:

  cls.pt, cls.pt.config.json  a small conv classifier (5 classes) traced the
      way EasyCV exports a classifier's test forward: forward returns
      {"prob": softmax(logits), "class": argmax}; the config beside it is
      what EasyCV writes beside a jit export (test_pipeline, class_list).
  logits.pt  the same network through torch.jit.script, returning plain
      logits, with no config (the processor's defaults apply).
  *.png, *.jpg  test images of several sizes and modes.
  refs.json  for each pipeline variant and image: the uint8 image after
      PIL's Resize/CenterCrop (base64), the sha256 of the normalised float32
      CHW tensor, and the model's probabilities; and PIL resize cases.
"""
import base64
import hashlib
import io
import json
import os
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(7)
rng = np.random.default_rng(7)
torch.set_num_threads(1)

CLASSES = ["cat", "dog", "bird", "fish", "cat "]  # a repeated name after strip


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(4))
        self.fc = torch.nn.Linear(16 * 16, 5)

    def forward(self, img):
        # A 4x4 grid of features: the scores depend on where things are,
        # so preprocessing errors show.
        return self.fc(torch.flatten(self.features(img), 1))


class EasyCVStyle(torch.nn.Module):
    """Mirrors EasyCV's Classification.forward_test: prob and class."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, img):
        prob = torch.softmax(self.net(img), dim=1)
        return {"prob": prob, "class": torch.argmax(prob)}


net = Net().eval()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.randn_like(p) * 0.3)
    net.features[1].running_mean.copy_(torch.randn(8) * 0.1)
    net.features[1].running_var.copy_(torch.rand(8) + 0.5)
    cls = torch.jit.trace(EasyCVStyle(net).eval(), torch.rand(1, 3, 224, 224), strict=False)
    cls.save(os.path.join(out, "cls.pt"))
    # The same network scripted (as EasyCV's export_jit_model does), whose
    # forward returns logits.
    logits = torch.jit.script(net)
    logits.save(os.path.join(out, "logits.pt"))

NORM = dict(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
DEFAULT_PIPELINE = [
    dict(type="Resize", size=256),
    dict(type="CenterCrop", size=224),
    dict(type="ToTensor"),
    dict(type="Normalize", **NORM),
    dict(type="Collect", keys=["img"]),
]
with open(os.path.join(out, "cls.pt.config.json"), "w") as f:
    json.dump(dict(model=dict(type="Classification"), test_pipeline=DEFAULT_PIPELINE, class_list=CLASSES), f)

# Pipeline variants, as test_pipeline lists (the processor's syntax too).
VARIANTS = {
    "default": DEFAULT_PIPELINE,
    "bicubic": [dict(type="Resize", size=[180, 240], interpolation=3), dict(type="ToTensor"),
                dict(type="Normalize", mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])],
    "pad": [dict(type="Resize", size=100), dict(type="CenterCrop", size=[120, 110]), dict(type="ToTensor"),
            dict(type="Normalize", **NORM)],
}
INTERP = {2: T.InterpolationMode.BILINEAR, 3: T.InterpolationMode.BICUBIC}


def torchvision_pipeline(steps):
    ts = []
    for s in steps:
        if s["type"] == "Resize":
            ts.append(T.Resize(s["size"], interpolation=INTERP[s.get("interpolation", 2)]))
        elif s["type"] == "CenterCrop":
            ts.append(T.CenterCrop(s["size"]))
        elif s["type"] == "ToTensor":
            ts.append(T.ToTensor())
        elif s["type"] == "Normalize":
            ts.append(T.Normalize(s["mean"], s["std"]))
    return ts


def picture(w, h, seed):
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1), (x + y) % 256], -1)
    base = base + 40 * np.sin(x / 7.0)[..., None] + r.normal(0, 25, (h, w, 3))
    return np.clip(base, 0, 255).astype(np.uint8)


images = {}
images["rgb_300x200.png"] = Image.fromarray(picture(300, 200, 1), "RGB")
images["rgb_150x400.png"] = Image.fromarray(picture(150, 400, 2), "RGB")
images["rgb_90x100.png"] = Image.fromarray(picture(90, 100, 3), "RGB")
images["gray_640x480.png"] = Image.fromarray(picture(640, 480, 4)[..., 0], "L")
rgba = np.concatenate([picture(256, 256, 5), rng.integers(0, 256, (256, 256, 1), dtype=np.uint8)], -1)
images["rgba_256x256.png"] = Image.fromarray(rgba, "RGBA")
images["palette_97x131.png"] = Image.fromarray(picture(97, 131, 6), "RGB").quantize(64)
g16 = (picture(120, 80, 8)[..., 0].astype(np.uint16) * 3)  # values past 255: PIL clips them
images["gray16_120x80.png"] = Image.fromarray(g16.astype(np.uint16), "I;16")
images["photo_500x375.jpg"] = Image.fromarray(picture(500, 375, 7), "RGB")  # 4:2:0, PIL's default
images["photo444_333x251.jpg"] = Image.fromarray(picture(333, 251, 10), "RGB")
images["photo422_201x150.jpg"] = Image.fromarray(picture(201, 150, 11), "RGB")

for name, im in images.items():
    path = os.path.join(out, name)
    if name.endswith(".jpg"):
        sub = 0 if "444" in name else 1 if "422" in name else 2
        im.save(path, quality=90, subsampling=sub)
    else:
        im.save(path)

refs = {"classes": CLASSES, "variants": {}, "resize": []}
for vname, steps in VARIANTS.items():
    ts = torchvision_pipeline(steps)
    pil_ts = T.Compose([t for t in ts if not isinstance(t, (T.ToTensor, T.Normalize))])
    tensor_ts = T.Compose([t for t in ts if isinstance(t, (T.ToTensor, T.Normalize))])
    cases = {}
    for name in images:
        # As EasyCV opens an input: PIL, converted to RGB.
        im = Image.open(os.path.join(out, name)).convert("RGB")
        pre = pil_ts(im)
        x = tensor_ts(pre)
        case = {
            "pre_w": pre.size[0], "pre_h": pre.size[1],
            "pre": base64.b64encode(np.asarray(pre, dtype=np.uint8).tobytes()).decode(),
            "tensor_sha256": hashlib.sha256(x.numpy().astype("<f4").tobytes()).hexdigest(),
        }
        with torch.no_grad():
            case["cls_prob"] = cls(x[None])["prob"][0].tolist()
            if vname == "default":
                case["logits_prob"] = torch.softmax(logits(x[None]), 1)[0].tolist()
        cases[name] = case
    refs["variants"][vname] = {"test_pipeline": steps, "images": cases}

# PIL resize, alone: up and down, each filter.
src = picture(37, 23, 9)
for (w, h) in [(37, 23), (11, 7), (80, 50), (36, 46), (5, 23), (37, 3), (1, 1), (200, 9)]:
    for filt, code in [("bilinear", Image.BILINEAR), ("bicubic", Image.BICUBIC), ("box", Image.BOX)]:
        got = Image.fromarray(src, "RGB").resize((w, h), code)
        refs["resize"].append({"w": w, "h": h, "filter": filt,
                               "out": base64.b64encode(np.asarray(got).tobytes()).decode()})
refs["resize_src"] = base64.b64encode(src.tobytes()).decode()

with open(os.path.join(out, "refs.json"), "w") as f:
    json.dump(refs, f)

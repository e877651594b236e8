"""Toy detector anchor matching: box_iou of (N, 4) and (M, 4) boxes with [:, None, :2], generalized IoU, box encoding, a regression head and NMS (clean)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    """IoU of every pair: boxes1 (N, 4), boxes2 (M, 4) in (x1, y1, x2, y2) -> (N, M)."""
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)

    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N,M,2]
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N,M,2]

    wh = (rb - lt).clamp(min=0)  # [N,M,2]
    inter = wh[:, :, 0] * wh[:, :, 1]  # [N,M]

    union = area1[:, None] + area2 - inter
    return inter / union, union


def generalized_box_iou(boxes1, boxes2):
    iou, union = box_iou(boxes1, boxes2)
    lti = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rbi = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    whi = (rbi - lti).clamp(min=0)  # [N,M,2]
    areai = whi[:, :, 0] * whi[:, :, 1]
    return iou - (areai - union) / areai


def make_anchors(grid_size, stride, sizes):
    shifts = (torch.arange(grid_size, dtype=torch.float32) + 0.5) * stride
    shift_y, shift_x = torch.meshgrid(shifts, shifts, indexing="ij")
    centers = torch.stack([shift_x.reshape(-1), shift_y.reshape(-1)], dim=1)  # (G*G, 2)
    centers = centers.repeat_interleave(len(sizes), dim=0)
    wh = torch.tensor(sizes, dtype=torch.float32).repeat(grid_size * grid_size, 1)
    return torch.cat([centers - wh / 2, centers + wh / 2], dim=1)  # (G*G*S, 4)


def encode(gt, anchors):
    """Regression targets (dx, dy, dw, dh) of matched gt boxes relative to their anchors."""
    a_wh = anchors[:, 2:] - anchors[:, :2]
    a_ctr = anchors[:, :2] + 0.5 * a_wh
    g_wh = gt[:, 2:] - gt[:, :2]
    g_ctr = gt[:, :2] + 0.5 * g_wh
    return torch.cat([(g_ctr - a_ctr) / a_wh, torch.log(g_wh / a_wh)], dim=1)


def nms(boxes, scores, iou_threshold):
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(int(i))
        if order.numel() == 1:
            break
        ious, _ = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]])
        order = order[1:][ious.squeeze(0) <= iou_threshold]
    return torch.tensor(keep, dtype=torch.long)


# sanity checks on hand-computed values
a = torch.tensor([[0.0, 0.0, 2.0, 2.0], [1.0, 1.0, 3.0, 3.0]])
b = torch.tensor([[0.0, 0.0, 2.0, 2.0], [2.0, 2.0, 4.0, 4.0], [10.0, 10.0, 11.0, 11.0]])
iou, _ = box_iou(a, b)
assert iou.shape == (2, 3)
assert torch.allclose(iou[0], torch.tensor([1.0, 0.0, 0.0]))
assert torch.allclose(iou[1, 0], torch.tensor(1.0 / 7.0))
giou = generalized_box_iou(a, b)
assert torch.all(giou <= iou + 1e-6) and torch.all(giou >= -1.0)

anchors = make_anchors(grid_size=4, stride=8, sizes=[(8.0, 8.0), (16.0, 16.0)])
gt_boxes = torch.tensor([[2.0, 3.0, 14.0, 13.0], [16.0, 16.0, 30.0, 31.0], [20.0, 2.0, 28.0, 10.0]])
gt_labels = torch.tensor([1, 2, 3])

iou, _ = box_iou(anchors, gt_boxes)  # (A, G)
best_iou, best_gt = iou.max(dim=1)
labels = torch.where(best_iou >= 0.4, gt_labels[best_gt], torch.zeros_like(best_gt))
# make sure every gt box gets at least its best anchor
best_anchor = iou.argmax(dim=0)
labels[best_anchor] = gt_labels
best_gt[best_anchor] = torch.arange(len(gt_boxes))
positive = labels > 0
targets = encode(gt_boxes[best_gt[positive]], anchors[positive])
print(f"{len(anchors)} anchors, {int(positive.sum())} positive")

features = torch.cat([anchors / 32.0, torch.randn(len(anchors), 4) * 0.1], dim=1)
head = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4 + 4))
optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
for step in range(60):
    out = head(features)
    box_pred, cls_logits = out[:, :4], out[:, 4:]
    reg_loss = F.smooth_l1_loss(box_pred[positive], targets, beta=1.0 / 9)
    cls_loss = F.cross_entropy(cls_logits, labels)
    loss = reg_loss + cls_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step}: reg {reg_loss.item():.4f} cls {cls_loss.item():.4f}")

with torch.no_grad():
    scores = F.softmax(head(features)[:, 4:], dim=1)[:, 1:].max(dim=1).values
    keep = nms(anchors, scores, iou_threshold=0.5)
print("kept after NMS:", keep.tolist()[:8], "final loss", round(loss.item(), 4))

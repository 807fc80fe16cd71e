"""The coffee cup, drawn with QPainter (no image files to ship or fetch).

One drawing at every size: the button, the window icon and the tray icon
(with a badge that shows how many are drinking). The cup is drawn in a
100 x 100 box and scaled, so it stays crisp on high-DPI screens.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QIcon, QPainter, QPainterPath, QPen, QPixmap

__all__ = ["badge_text", "cup_icon", "cup_pixmap", "paint_badge", "paint_cup"]

OUTLINE = QColor("#5d4037")
CHINA = QColor("#fffaf2")
CHINA_SHADE = QColor("#eadfce")
COFFEE = QColor("#6b3e1f")
EMPTY = QColor("#f1e9dd")
STEAM = QColor(120, 120, 120, 170)
BADGE = QColor("#c62828")


def paint_cup(painter: QPainter, rect: QRectF, *, full: bool, steam: bool) -> None:
    """Draw the cup (on its saucer) into ``rect``: ``full`` of coffee or
    empty, with rising ``steam`` or without."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    side = min(rect.width(), rect.height())
    painter.translate(rect.center().x() - side / 2, rect.center().y() - side / 2)
    painter.scale(side / 100, side / 100)
    outline = QPen(OUTLINE, 3.2, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap,
                   Qt.PenJoinStyle.RoundJoin)

    # saucer
    painter.setPen(outline)
    painter.setBrush(QBrush(CHINA_SHADE))
    painter.drawEllipse(QRectF(8, 80, 84, 14))

    # handle, behind the body
    handle = QPen(OUTLINE, 9, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap)
    painter.setPen(handle)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    painter.drawEllipse(QRectF(63, 47, 21, 20))
    painter.setPen(QPen(CHINA, 4.5))
    painter.drawEllipse(QRectF(63, 47, 21, 20))

    # body
    body = QPainterPath(QPointF(18, 40))
    body.lineTo(76, 40)
    body.cubicTo(76, 66, 68, 84, 56, 86)
    body.lineTo(38, 86)
    body.cubicTo(26, 84, 18, 66, 18, 40)
    body.closeSubpath()
    painter.setPen(outline)
    painter.setBrush(QBrush(CHINA))
    painter.drawPath(body)

    # rim and what is in the cup
    painter.setBrush(QBrush(COFFEE if full else EMPTY))
    painter.drawEllipse(QRectF(18, 34, 58, 12))
    if full:   # a little crema highlight
        painter.setPen(QPen(QColor("#a8703f"), 2))
        painter.drawArc(QRectF(28, 37, 30, 6), 20 * 16, 140 * 16)

    if steam:
        painter.setPen(QPen(STEAM, 3.2, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for x in (34, 47, 60):
            wisp = QPainterPath(QPointF(x, 30))
            wisp.cubicTo(x - 7, 24, x + 7, 17, x, 11)
            wisp.cubicTo(x - 5, 7, x + 3, 3, x + 1, 1)
            painter.drawPath(wisp)
    painter.restore()


def badge_text(count: int) -> str:
    """What the badge says: the count, capped so it fits."""
    return "99+" if count > 99 else str(max(0, count))


def paint_badge(painter: QPainter, rect: QRectF, count: int) -> None:
    """A red disc with the count in the top-right corner of ``rect``."""
    if count <= 0:
        return
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    side = min(rect.width(), rect.height())
    text = badge_text(count)
    diameter = side * (0.5 if len(text) == 1 else 0.58)
    width = diameter * (1.0 if len(text) < 3 else 1.35)
    box = QRectF(rect.right() - width, rect.top(), width, diameter)
    painter.setPen(QPen(QColor("white"), max(1.0, side / 40)))
    painter.setBrush(QBrush(BADGE))
    painter.drawRoundedRect(box, diameter / 2, diameter / 2)
    font = QFont()
    font.setBold(True)
    font.setPixelSize(max(6, int(diameter * (0.66 if len(text) < 3 else 0.5))))
    painter.setFont(font)
    painter.setPen(QColor("white"))
    painter.drawText(box, Qt.AlignmentFlag.AlignCenter, text)
    painter.restore()


def cup_pixmap(size: int, *, full: bool = False, steam: bool = False, count: int = 0,
               device_pixel_ratio: float = 1.0) -> QPixmap:
    """The cup as a transparent pixmap of ``size`` logical pixels, with a
    badge when ``count`` > 0."""
    pixmap = QPixmap(int(size * device_pixel_ratio), int(size * device_pixel_ratio))
    pixmap.setDevicePixelRatio(device_pixel_ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    rect = QRectF(0, 0, size, size)
    paint_cup(painter, rect, full=full, steam=steam)
    paint_badge(painter, rect, count)
    painter.end()
    return pixmap


def cup_icon(*, full: bool = False, steam: bool = False, count: int = 0) -> QIcon:
    """An icon with the common sizes drawn, not scaled from one bitmap."""
    icon = QIcon()
    for size in (16, 22, 24, 32, 48, 64, 128):
        icon.addPixmap(cup_pixmap(size, full=full, steam=steam, count=count))
    return icon

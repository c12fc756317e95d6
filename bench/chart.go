package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// The chart is drawn with the standard image packages and three pieces of
// golang.org/x/image (the Go font, its rasteriser and an anti-aliasing path
// filler): one small module maintained with Go itself, instead of a plotting
// library whose dependency tree would dwarf the benchmark.

// A series is one library's waits in one panel.
type series struct {
	name  string
	col   color.RGBA
	waits []time.Duration // sorted
}

// A panel is one contended scenario.
type panel struct {
	title  string
	series []series
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, // leash Mutex: blue
	{0x2c, 0xa0, 0x2c, 0xff}, // leash FairMutex: green
	{0xd6, 0x27, 0x28, 0xff}, // redsync: red
	{0xff, 0x7f, 0x0e, 0xff}, // bsm/redislock: orange
	{0x94, 0x67, 0xbd, 0xff}, // rueidislock: purple
}

const (
	chartW, chartH = 1200, 560
	minWaitMS      = 0.1
	maxWaitMS      = 10_000
	minFrac        = 1e-3
)

// drawChart renders one survival curve (the fraction of waits longer than
// x, both axes logarithmic) per library and panel, so the tails show.
func drawChart(path string, panels []panel) error {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	face, err := newFace(13)
	if err != nil {
		return err
	}
	big, err := newFace(16)
	if err != nil {
		return err
	}
	pw := chartW / len(panels)
	for i, p := range panels {
		drawPanel(img, face, big, image.Rect(i*pw, 0, (i+1)*pw, chartH), p)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newFace(size float64) (font.Face, error) {
	ft, err := opentype.Parse(goregular.TTF)
	if err != nil {
		return nil, err
	}
	return opentype.NewFace(ft, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
}

func drawPanel(img *image.RGBA, face, big font.Face, r image.Rectangle, p panel) {
	plot := image.Rect(r.Min.X+70, r.Min.Y+60, r.Max.X-30, r.Max.Y-150)
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	dark := color.RGBA{0x33, 0x33, 0x33, 0xff}
	x := func(ms float64) float64 {
		return float64(plot.Min.X) + (math.Log10(ms)-math.Log10(minWaitMS))/
			(math.Log10(maxWaitMS)-math.Log10(minWaitMS))*float64(plot.Dx())
	}
	y := func(frac float64) float64 {
		return float64(plot.Min.Y) + (-math.Log10(frac))/(-math.Log10(minFrac))*float64(plot.Dy())
	}
	text(img, big, r.Min.X+70, r.Min.Y+24, dark, p.title)
	for _, ms := range []float64{0.1, 1, 10, 100, 1000, 10000} {
		line(img, x(ms), float64(plot.Min.Y), x(ms), float64(plot.Max.Y), 1, grey)
		label := fmt.Sprintf("%g ms", ms)
		if ms >= 1000 {
			label = fmt.Sprintf("%g s", ms/1000)
		}
		text(img, face, int(x(ms))-width(face, label)/2, plot.Max.Y+18, dark, label)
	}
	for _, frac := range []float64{1, 0.1, 0.01, 0.001} {
		line(img, float64(plot.Min.X), y(frac), float64(plot.Max.X), y(frac), 1, grey)
		label := fmt.Sprintf("%g", frac)
		text(img, face, plot.Min.X-8-width(face, label), int(y(frac))+4, dark, label)
	}
	text(img, face, plot.Min.X+plot.Dx()/2-width(face, "wait for the lock (log)")/2, plot.Max.Y+36, dark, "wait for the lock (log)")
	text(img, face, r.Min.X+10, plot.Min.Y-12, dark, "share of waits longer than x (log)")
	line(img, float64(plot.Min.X), float64(plot.Max.Y), float64(plot.Max.X), float64(plot.Max.Y), 1, dark)
	line(img, float64(plot.Min.X), float64(plot.Min.Y), float64(plot.Min.X), float64(plot.Max.Y), 1, dark)
	for i, s := range p.series {
		var pts [][2]float64
		n := len(s.waits)
		for j, w := range s.waits {
			// After the j-th smallest wait, (n-j-1)/n of the waits are longer.
			ms := math.Min(math.Max(float64(w)/1e6, minWaitMS), maxWaitMS)
			frac := float64(n-j) / float64(n)
			if frac < minFrac {
				break
			}
			pt := [2]float64{x(ms), y(frac)}
			if k := len(pts); k > 0 && j < n-1 && math.Abs(pts[k-1][0]-pt[0]) < 0.5 && math.Abs(pts[k-1][1]-pt[1]) < 0.5 {
				continue // thin the curve to one point per half pixel
			}
			pts = append(pts, pt)
		}
		polyline(img, pts, 2.2, s.col)
		ly := plot.Max.Y + 58 + i*17
		line(img, float64(plot.Min.X), float64(ly-4), float64(plot.Min.X+24), float64(ly-4), 3, s.col)
		label := s.name
		if n > 0 {
			label = fmt.Sprintf("%s — p50 %s, p99 %s, max %s (%d waits)", s.name,
				fmtDur(pct(s.waits, 0.5)), fmtDur(pct(s.waits, 0.99)), fmtDur(s.waits[n-1]), n)
		}
		text(img, face, plot.Min.X+32, ly, dark, label)
	}
}

func text(img *image.RGBA, face font.Face, x, y int, c color.Color, s string) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func width(face font.Face, s string) int { return font.MeasureString(face, s).Round() }

func line(img *image.RGBA, x0, y0, x1, y1, w float64, c color.RGBA) {
	polyline(img, [][2]float64{{x0, y0}, {x1, y1}}, w, c)
}

// polyline strokes pts with width w, anti-aliased.
func polyline(img *image.RGBA, pts [][2]float64, w float64, c color.RGBA) {
	if len(pts) < 2 {
		return
	}
	b := img.Bounds()
	r := vector.NewRasterizer(b.Dx(), b.Dy())
	for i := 1; i < len(pts); i++ {
		x0, y0, x1, y1 := pts[i-1][0], pts[i-1][1], pts[i][0], pts[i][1]
		dx, dy := x1-x0, y1-y0
		l := math.Hypot(dx, dy)
		if l == 0 {
			continue
		}
		// A rectangle around the segment, extended by half the width at both
		// ends so that joints are filled.
		ux, uy := dx/l*w/2, dy/l*w/2
		nx, ny := -uy, ux
		r.MoveTo(float32(x0-ux+nx), float32(y0-uy+ny))
		r.LineTo(float32(x1+ux+nx), float32(y1+uy+ny))
		r.LineTo(float32(x1+ux-nx), float32(y1+uy-ny))
		r.LineTo(float32(x0-ux-nx), float32(y0-uy-ny))
		r.ClosePath()
	}
	r.Draw(img, b, image.NewUniform(c), image.Point{})
}

// fmtDur prints a duration with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3g s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3g ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.3g µs", float64(d)/1e3)
}

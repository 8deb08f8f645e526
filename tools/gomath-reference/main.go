// Command gomath-reference prints Go's own results for the math functions whose last bits
// decide upstream VPA's integers (math.Pow, math.Log, math.Exp2, and FindBucket built on
// them), for the engine's bit-for-bit tests (tests/engine/data/go_math_reference.json).
//
// Run it with the Go toolchain on amd64 (upstream's reference architecture):
//
//	go run ./tools/gomath-reference > tests/engine/data/go_math_reference.json
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
)

// A small deterministic generator (64-bit LCG), so the inputs need no data file.
type lcg struct{ state uint64 }

func (g *lcg) next() float64 {
	g.state = g.state*6364136223846793005 + 1442695040888963407
	return float64(g.state>>11) / float64(1<<53)
}

func bits(x float64) string { return fmt.Sprintf("%016x", math.Float64bits(x)) }

// exponential mirrors upstream's ExponentialHistogramOptions (histogram_options.go).
type exponential struct {
	name               string
	maxValue, first, r float64
	numBuckets         int
}

func newExponential(name string, maxValue, first, growth float64) exponential {
	ratio := 1.0 + growth
	n := int(math.Ceil(math.Log(maxValue*(ratio-1)/first+1)/math.Log(ratio))) + 1
	return exponential{name, maxValue, first, ratio, n}
}

func (o exponential) findBucket(v float64) int {
	if v < o.first {
		return 0
	}
	b := int(math.Log(v*(o.r-1)/o.first+1) / math.Log(o.r))
	if b >= o.numBuckets {
		return o.numBuckets - 1
	}
	return b
}

func (o exponential) bucketStart(b int) float64 {
	if b == 0 {
		return 0.0
	}
	return o.first * (math.Pow(o.r, float64(b)) - 1) / (o.r - 1)
}

func main() {
	out := map[string]interface{}{}

	var pow [][]interface{}
	for _, base := range []float64{1.05, 1.5, 1.1, 2.0, 0.95, 1.0 + 0.05} {
		for n := 0; n <= 200; n++ {
			pow = append(pow, []interface{}{bits(base), n, bits(math.Pow(base, float64(n)))})
		}
	}
	out["pow"] = pow

	histograms := []exponential{
		newExponential("cpu", 1000.0, 0.01, 0.05),
		newExponential("memory", 1e12, 1e7, 0.05),
	}
	var starts, buckets [][]interface{}
	var logs [][]interface{}
	for _, h := range histograms {
		for b := 0; b < h.numBuckets; b++ {
			start := h.bucketStart(b)
			starts = append(starts, []interface{}{h.name, b, bits(start)})
			// The boundary, its neighbours one ulp away and the truncated integer
			// (upstream works in whole bytes and millicores).
			for _, v := range []float64{start, math.Nextafter(start, 0), math.Nextafter(start, math.Inf(1)), math.Trunc(start), math.Trunc(start) + 1} {
				buckets = append(buckets, []interface{}{h.name, bits(v), h.findBucket(v)})
				if v >= h.first {
					arg := v*(h.r-1)/h.first + 1
					logs = append(logs, []interface{}{bits(arg), bits(math.Log(arg))})
				}
			}
		}
	}
	g := &lcg{state: 20261121}
	for i := 0; i < 3000; i++ {
		// Log-uniform over 1e-4 .. 1e14.
		x := math.Pow(10, -4+18*g.next())
		logs = append(logs, []interface{}{bits(x), bits(math.Log(x))})
		h := histograms[i%2]
		buckets = append(buckets, []interface{}{h.name, bits(x), h.findBucket(x)})
	}
	out["bucket_start"] = starts
	out["find_bucket"] = buckets
	out["log"] = logs

	// Decay factors as upstream computes them: Exp2(float64(ns(t-ref))/float64(ns(halfLife))).
	var exp2 [][]interface{}
	dayNs := float64(24 * 3600 * 1e9)
	for minutes := int64(-10000); minutes <= 144000; minutes += 23 {
		x := float64(minutes*60*1e9) / dayNs
		exp2 = append(exp2, []interface{}{bits(x), bits(math.Exp2(x))})
	}
	for i := 0; i < 3000; i++ {
		x := -1080 + 2110*g.next()
		exp2 = append(exp2, []interface{}{bits(x), bits(math.Exp2(x))})
	}
	out["exp2"] = exp2
	out["go_version"] = runtime.Version() + " " + runtime.GOARCH

	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

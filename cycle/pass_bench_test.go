package cycle

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// peakSampler samples, until stop, the most goroutines and goroutine
// stack bytes seen.
type peakSampler struct {
	stop               chan struct{}
	done               sync.WaitGroup
	goroutines, stacks uint64
}

func samplePeaks() *peakSampler {
	p := &peakSampler{stop: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	p.done.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			p.stacks = max(p.stacks, s[0].Value.Uint64())
			p.goroutines = max(p.goroutines, s[1].Value.Uint64())
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	})
	return p
}

func (p *peakSampler) end() { close(p.stop); p.done.Wait() }

// BenchmarkPassApplications is one cycle over 5,000 Applications of one
// image each, 100 repositories, every image already at the highest
// version. What a pass holds for the Applications waiting their turn is
// reported as the most goroutines and goroutine stack bytes seen.
func BenchmarkPassApplications(b *testing.B) {
	const apps, repos = 5000, 100
	list := make(benchApps, apps)
	for i := range list {
		list[i] = semverApp(b, fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("app-%04d", i), fmt.Sprintf("registry.example.com/team/img-%d", i%repos))
	}
	reg := &benchRegistry{tags: []string{"v0.9.0", "v1.0.0"}}
	u := mustNew(b, list, reg, &benchWriter{})
	runtime.GC()
	p := samplePeaks()
	b.ReportAllocs()
	for b.Loop() {
		if sum := u.RunOnce(b.Context()); sum.Errors != 0 || sum.Images != apps {
			b.Fatalf("summary %+v", sum)
		}
	}
	p.end()
	b.ReportMetric(float64(p.goroutines), "peak-goroutines")
	b.ReportMetric(float64(p.stacks)/(1<<20), "peak-stack-MiB")
}

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc CPU times on Linux.
const clockTicks = 100

// procCPU is the CPU time (user and system) a process has used.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields follow its ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q %q", pid, fields[11], fields[12])
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// machineCPU is the CPU time all processes have used (busy, not idle or
// waiting for I/O), summed over the cores.
func machineCPU() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, err
		}
		// idle and iowait are the 4th and 5th; guest times are already
		// counted in user.
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// findPID finds a process by a string in its command line, for servers
// the test environment starts without telling their process IDs.
func findPID(match string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), match) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if pid != os.Getpid() {
			return pid
		}
	}
	return 0
}

// cpuMark is the CPU used so far by the machine, the controller and the
// registry.
type cpuMark struct {
	at                            time.Time
	machine, controller, registry time.Duration
}

func markCPU(controllerPID, registryPID int) cpuMark {
	m := cpuMark{at: time.Now()}
	m.machine, _ = machineCPU()
	if controllerPID > 0 {
		m.controller, _ = procCPU(controllerPID)
	}
	if registryPID > 0 {
		m.registry, _ = procCPU(registryPID)
	}
	return m
}

// rssSampler records the highest resident memory of a process between
// two takes, sampling /proc ten times a second: the Prometheus gauge only
// shows the moment it is scraped.
type rssSampler struct {
	mu   sync.Mutex
	peak int64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, err := procStatusKB(pid, "VmRSS"); err == nil {
				s.mu.Lock()
				s.peak = max(s.peak, rss)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// take returns the peak since the last take.
func (s *rssSampler) take() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.peak
	s.peak = 0
	return p
}

func (s *rssSampler) close() {
	close(s.stop)
	<-s.done
}

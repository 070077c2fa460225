package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
)

const (
	unitFile    = "coding-agent.service"
	systemdTool = "/usr/bin/systemd-analyze"
	execPath    = "/usr/local/bin/coding-agent"
	// systemd-analyze security's overall exposure, 0 (best) to 10. It was
	// 1.4 before the sandbox; the sandbox's level namespaces needs six
	// namespace types, mount, pivot_root and sethostname in the system-call
	// filter, and ProtectKernelTunables, ProtectKernelLogs and
	// ProtectHostname off (sandbox_test.go says why): measured 2.6 with
	// systemd 252.
	maxExposure  = "2.6"
	stateDir     = "/var/lib/coding-agent"
	wantExecLine = execPath + " serve --config /etc/coding-agent/config.yaml"
)

// unitKeys reads a unit file's [Service] and [Install] entries (a key given
// twice keeps every value, in order).
func unitKeys(text string) map[string][]string {
	keys := map[string][]string{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, _ := strings.Cut(line, "=")
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	return keys
}

// unitProblems checks what the unit promises: a dedicated user, the daemon
// with its config, secrets from an EnvironmentFile, a restart on failure, a
// stop timeout above shutdown_grace_seconds, and the hardening with the
// state directory (state, workspaces, logs) writable.
func unitProblems(text string) []string {
	k := unitKeys(text)
	one := func(key string) string {
		if v := k[key]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	var ps []string
	want := map[string]string{
		"Service.ExecStart": wantExecLine, "Service.Restart": "on-failure", "Service.NoNewPrivileges": "yes",
		"Service.ProtectSystem": "strict", "Service.WorkingDirectory": stateDir, "Service.StateDirectory": "coding-agent",
		"Service.EnvironmentFile": "/etc/coding-agent/env", "Install.WantedBy": "multi-user.target",
	}
	for key, v := range want {
		if got := one(key); got != v {
			ps = append(ps, key+"="+got+", want "+v)
		}
	}
	if u := one("Service.User"); u == "" || u == "root" || u == "0" {
		ps = append(ps, "Service.User="+u+": want a dedicated user")
	}
	if !strings.Contains(" "+one("Service.ReadWritePaths")+" ", " "+stateDir+" ") {
		ps = append(ps, "ReadWritePaths does not hold "+stateDir+": under ProtectSystem=strict the store, workspaces and logs could not be written")
	}
	stop, err := time.ParseDuration(strings.ReplaceAll(one("Service.TimeoutStopSec"), " ", ""))
	if err != nil {
		stop, err = time.ParseDuration(one("Service.TimeoutStopSec") + "s")
	}
	if err != nil || stop <= config.Default().ShutdownGrace() {
		ps = append(ps, "TimeoutStopSec="+one("Service.TimeoutStopSec")+": want more than shutdown_grace_seconds")
	}
	return ps
}

func TestSystemdUnitKeys(t *testing.T) {
	text := readUnit(t)
	if ps := unitProblems(text); len(ps) != 0 {
		t.Errorf("%s:\n%s", unitFile, strings.Join(ps, "\n"))
	}
	for _, tc := range [][2]string{
		{"User=coding-agent", "User=root"},
		{"TimeoutStopSec=60", "TimeoutStopSec=3"},
		{"ReadWritePaths=/var/lib/coding-agent /var/log/coding-agent", "ReadWritePaths=/var/log/coding-agent"},
		{"NoNewPrivileges=yes", "NoNewPrivileges=no"},
	} {
		bad := strings.Replace(text, tc[0], tc[1], 1)
		if bad == text || len(unitProblems(bad)) == 0 {
			t.Errorf("%q → %q: not found", tc[0], tc[1])
		}
	}
}

func readUnit(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// verify runs systemd-analyze verify on the unit text, with the binary's
// path pointed at an executable that exists here (verify checks it), and
// returns what it said: nothing for a clean unit. systemd-analyze exits 0
// for an unknown key or a value it cannot parse, and says so: any output is
// a finding.
func verify(t *testing.T, text string) string {
	t.Helper()
	if _, err := os.Stat(systemdTool); err != nil {
		t.Skipf("%s is not installed (Debian's systemd package): %v", systemdTool, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), unitFile)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, execPath, exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(systemdTool, "verify", path).CombinedOutput()
	if err != nil {
		return string(out) + err.Error()
	}
	return string(out)
}

func TestSystemdUnitVerifies(t *testing.T) {
	text := readUnit(t)
	if !strings.Contains(text, "ExecStart="+wantExecLine) {
		t.Fatalf("ExecStart is not %s", wantExecLine)
	}
	if out := verify(t, text); out != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
	// It finds faults: the check can fail.
	for _, bad := range []string{"NoNewPrivileges=maybe", "ProtectSystm=strict", "Restart=sometimes"} {
		if out := verify(t, strings.Replace(text, "RestartSec=10s", "RestartSec=10s\n"+bad, 1)); out == "" {
			t.Errorf("%s: systemd-analyze verify said nothing", bad)
		}
	}
}

// The hardening as systemd measures it: the overall exposure of
// systemd-analyze security stays at most maxExposure.
func TestSystemdUnitExposure(t *testing.T) {
	text := readUnit(t)
	if _, err := os.Stat(systemdTool); err != nil {
		t.Skipf("%s is not installed: %v", systemdTool, err)
	}
	exposure := func(text string) (string, error) {
		path := filepath.Join(t.TempDir(), unitFile)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(systemdTool, "security", "--offline=true", "--threshold="+thresholdArg(), path).CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1], err
	}
	last, err := exposure(text)
	t.Log(last)
	if err != nil {
		t.Errorf("exposure above %s: %s (%v)", maxExposure, last, err)
	}
	weak := strings.NewReplacer("ProtectSystem=strict", "ProtectSystem=no", "NoNewPrivileges=yes", "NoNewPrivileges=no",
		"SystemCallFilter=@system-service\n", "", "CapabilityBoundingSet=\n", "", "PrivateDevices=yes", "PrivateDevices=no").Replace(text)
	if last, err := exposure(weak); err == nil {
		t.Errorf("a unit without its hardening passed: %s", last)
	}
}

// thresholdArg is maxExposure as systemd-analyze's --threshold wants it: an
// integer from 0 to 100 (the exposure times ten).
func thresholdArg() string {
	whole, frac, _ := strings.Cut(maxExposure, ".")
	return strings.TrimLeft(whole+frac, "0")
}

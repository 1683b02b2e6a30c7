// Legba: real-time rooms for GStreamer
// SPDX-License-Identifier: LGPL-2.1-or-later

// The benchmarks' Pion peer (Debian golang-github-pion-webrtc.v3-dev):
// two PeerConnections in this process, the offer, answer and candidates
// handed across directly. Same modes and JSON as
// bench/peers/webrtcbin-peer.c:
//
//	pion-peer setup [-iterations N]
//	pion-peer bulk  [-bytes B] [-size S]
//	pion-peer rtt   [-count N] [-rate R] [-size S]
//	pion-peer pairs [-count N] [-seconds S]
//	pion-peer call  -out PORT
//
// call: a video call as an application on Pion makes one, the codecs
// its own business (Pion has none): one PeerConnection sends an H.264
// track fed with the RTP packets that arrive on a UDP socket of
// 127.0.0.1, the other forwards the packets of the track it receives to
// 127.0.0.1:PORT (payload type 96). It prints {"in_port": N} once the
// two are connected, forwards until standard input closes, then prints
// its figures.
//
// ICE as for every peer of the suite: no STUN server, host candidates on
// 127.0.0.1 only (Pion leaves loopback out by default), no mDNS.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/pion/ice/v2"
	"github.com/pion/interceptor"
	"github.com/pion/webrtc/v3"
)

var api *webrtc.API
var settings webrtc.SettingEngine

// monotonic, from the start of the process
var base = time.Now()

func nowMs() float64 { return float64(time.Since(base).Nanoseconds()) / 1e6 }

func cpuS() float64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
}

type pair struct {
	a, b     *webrtc.PeerConnection
	dca, dcb *webrtc.DataChannel
	openA    chan struct{}
	openB    chan struct{}
}

func newPair() (*pair, error) {
	return newPairWith(api, nil)
}

// newPairWith: the pair, made by api; prepare (when not nil) describes
// more of the session before the offer.
func newPairWith(api *webrtc.API, prepare func(p *pair) error) (*pair, error) {
	p := &pair{openA: make(chan struct{}), openB: make(chan struct{})}
	var err error
	if p.a, err = api.NewPeerConnection(webrtc.Configuration{}); err != nil {
		return nil, err
	}
	if p.b, err = api.NewPeerConnection(webrtc.Configuration{}); err != nil {
		return nil, err
	}
	if prepare != nil {
		if err = prepare(p); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	var pendingA, pendingB []webrtc.ICECandidateInit
	remoteSetA, remoteSetB := false, false
	p.a.OnICECandidate(func(c *webrtc.ICECandidate) {
		if c == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if remoteSetB {
			p.b.AddICECandidate(c.ToJSON())
		} else {
			pendingB = append(pendingB, c.ToJSON())
		}
	})
	p.b.OnICECandidate(func(c *webrtc.ICECandidate) {
		if c == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if remoteSetA {
			p.a.AddICECandidate(c.ToJSON())
		} else {
			pendingA = append(pendingA, c.ToJSON())
		}
	})
	p.b.OnDataChannel(func(dc *webrtc.DataChannel) {
		p.dcb = dc
		dc.OnOpen(func() { close(p.openB) })
	})
	if p.dca, err = p.a.CreateDataChannel("bench", nil); err != nil {
		return nil, err
	}
	p.dca.OnOpen(func() { close(p.openA) })
	offer, err := p.a.CreateOffer(nil)
	if err != nil {
		return nil, err
	}
	if err = p.a.SetLocalDescription(offer); err != nil {
		return nil, err
	}
	if err = p.b.SetRemoteDescription(offer); err != nil {
		return nil, err
	}
	answer, err := p.b.CreateAnswer(nil)
	if err != nil {
		return nil, err
	}
	if err = p.b.SetLocalDescription(answer); err != nil {
		return nil, err
	}
	mu.Lock()
	remoteSetB = true
	for _, c := range pendingB {
		p.b.AddICECandidate(c)
	}
	mu.Unlock()
	if err = p.a.SetRemoteDescription(answer); err != nil {
		return nil, err
	}
	mu.Lock()
	remoteSetA = true
	for _, c := range pendingA {
		p.a.AddICECandidate(c)
	}
	mu.Unlock()
	return p, nil
}

func (p *pair) wait(d time.Duration) bool {
	t := time.After(d)
	select {
	case <-p.openA:
	case <-t:
		return false
	}
	select {
	case <-p.openB:
	case <-t:
		return false
	}
	return true
}

func (p *pair) close() {
	p.a.Close()
	p.b.Close()
}

func countDir(path string) int {
	entries, _ := os.ReadDir(path)
	return len(entries)
}

func rssKiB() float64 {
	data, _ := os.ReadFile("/proc/self/status")
	var v float64
	for _, line := range splitLines(string(data)) {
		if len(line) > 6 && line[:6] == "VmRSS:" {
			fmt.Sscanf(line[6:], "%f", &v)
		}
	}
	return v
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func main() {
	iterations := flag.Int("iterations", 10, "setup: pairs")
	bytes := flag.Int("bytes", 32*1024*1024, "bulk: bytes")
	size := flag.Int("size", 1024, "message size")
	count := flag.Int("count", 500, "rtt messages / pairs")
	rate := flag.Float64("rate", 100, "rtt: messages/s")
	seconds := flag.Float64("seconds", 120, "pairs: bound")
	outPort := flag.Int("out", 0, "call: the UDP port of 127.0.0.1 to forward to")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "give one mode: setup|bulk|rtt|pairs|call")
		os.Exit(2)
	}
	mode := os.Args[1]
	flag.CommandLine.Parse(os.Args[2:])

	settings.SetIncludeLoopbackCandidate(true)
	settings.SetIPFilter(func(ip net.IP) bool { return ip.IsLoopback() })
	settings.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	settings.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	api = webrtc.NewAPI(webrtc.WithSettingEngine(settings))

	out := map[string]interface{}{"peer": "pion", "mode": mode}
	ok := true
	switch mode {
	case "setup":
		times := []float64{}
		failed := 0
		for i := 0; i < *iterations; i++ {
			t0 := nowMs()
			p, err := newPair()
			if err != nil || !p.wait(30*time.Second) {
				failed++
			} else {
				times = append(times, nowMs()-t0)
			}
			if p != nil {
				p.close()
			}
		}
		out["setup_ms"], out["failed"] = times, failed
		ok = len(times) > 0
	case "bulk":
		p, err := newPair()
		if err != nil || !p.wait(30*time.Second) {
			fmt.Fprintln(os.Stderr, "the data channel did not open")
			os.Exit(1)
		}
		total := (*bytes / *size) * *size
		var received int64
		var mu sync.Mutex
		done := make(chan struct{})
		p.dcb.OnMessage(func(m webrtc.DataChannelMessage) {
			mu.Lock()
			received += int64(len(m.Data))
			if received == int64(total) {
				close(done)
			}
			mu.Unlock()
		})
		low := make(chan struct{}, 1)
		p.dca.SetBufferedAmountLowThreshold(256 * 1024)
		p.dca.OnBufferedAmountLow(func() {
			select {
			case low <- struct{}{}:
			default:
			}
		})
		msg := make([]byte, *size)
		t0, c0 := nowMs(), cpuS()
		for sent := 0; sent < total; {
			if p.dca.BufferedAmount() > 1024*1024 {
				<-low
				continue
			}
			p.dca.Send(msg)
			sent += *size
		}
		complete := true
		select {
		case <-done:
		case <-time.After(120 * time.Second):
			complete = false
		}
		t, c := (nowMs()-t0)/1000, cpuS()-c0
		out["bytes"], out["size"], out["seconds"], out["cpu_s"] = total, *size, t, c
		out["mb_per_s"] = float64(total) / 1e6 / t
		out["cpu_s_per_mb"] = c / (float64(total) / 1e6)
		out["complete"] = complete
		ok = complete
		p.close()
	case "rtt":
		p, err := newPair()
		if err != nil || !p.wait(30*time.Second) {
			fmt.Fprintln(os.Stderr, "the data channel did not open")
			os.Exit(1)
		}
		var mu sync.Mutex
		rtts := []float64{}
		done := make(chan struct{})
		p.dcb.OnMessage(func(m webrtc.DataChannelMessage) { p.dcb.Send(m.Data) })
		p.dca.OnMessage(func(m webrtc.DataChannelMessage) {
			sent := math.Float64frombits(binary.LittleEndian.Uint64(m.Data))
			mu.Lock()
			rtts = append(rtts, nowMs()-sent)
			if len(rtts) == *count {
				close(done)
			}
			mu.Unlock()
		})
		msg := make([]byte, *size)
		c0 := cpuS()
		start := nowMs()
		for i := 0; i < *count; i++ {
			due := start + float64(i)*1000 / *rate
			if w := due - nowMs(); w > 0 {
				time.Sleep(time.Duration(w * 1e6))
			}
			binary.LittleEndian.PutUint64(msg, math.Float64bits(nowMs()))
			p.dca.Send(msg)
		}
		complete := true
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			complete = false
		}
		mu.Lock()
		out["rtt_ms"] = append([]float64{}, rtts...)
		mu.Unlock()
		out["sent"], out["size"], out["rate"] = *count, *size, *rate
		out["cpu_s"], out["complete"] = cpuS()-c0, complete
		ok = complete
		p.close()
	case "pairs":
		rss0, fds0, th0 := rssKiB(), countDir("/proc/self/fd"), countDir("/proc/self/task")
		t0 := nowMs()
		live := []*pair{}
		stop := "count"
		for i := 0; i < *count; i++ {
			p, err := newPair()
			if err != nil || !p.wait(30*time.Second) {
				stop = "a pair did not connect within 30 s"
				break
			}
			live = append(live, p)
			if nowMs()-t0 > *seconds*1000 {
				stop = "time bound"
				break
			}
		}
		n := float64(len(live))
		out["asked"], out["connected"], out["stopped"] = *count, len(live), stop
		out["seconds"] = (nowMs() - t0) / 1000
		if n > 0 {
			out["rss_kib_per_pair"] = (rssKiB() - rss0) / n
			out["fds_per_pair"] = float64(countDir("/proc/self/fd")-fds0) / n
			out["threads_per_pair"] = float64(countDir("/proc/self/task")-th0) / n
		}
		ok = n > 0
		for _, p := range live {
			p.close()
		}
	case "call":
		ok = call(out, *outPort)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	if !ok {
		os.Exit(1)
	}
}

// call: see the mode's description at the top of this file.
func call(out map[string]interface{}, outPort int) bool {
	if outPort <= 0 || outPort > 65535 {
		fmt.Fprintln(os.Stderr, "call: give -out PORT")
		return false
	}
	// Pion's own media defaults: its codecs, NACK, RTCP reports and the
	// transport-wide congestion-control feedback.
	m := &webrtc.MediaEngine{}
	reg := &interceptor.Registry{}
	if err := m.RegisterDefaultCodecs(); err != nil {
		fmt.Fprintln(os.Stderr, "call:", err)
		return false
	}
	if err := webrtc.RegisterDefaultInterceptors(m, reg); err != nil {
		fmt.Fprintln(os.Stderr, "call:", err)
		return false
	}
	mediaAPI := webrtc.NewAPI(webrtc.WithSettingEngine(settings),
		webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg))

	track, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{
		MimeType:    webrtc.MimeTypeH264,
		ClockRate:   90000,
		SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
	}, "video", "pion")
	if err != nil {
		fmt.Fprintln(os.Stderr, "call:", err)
		return false
	}
	dst, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: outPort})
	if err != nil {
		fmt.Fprintln(os.Stderr, "call:", err)
		return false
	}
	defer dst.Close()

	var mu sync.Mutex
	var packetsIn, packetsOut int
	var firstCPU, lastCPU, firstMs, lastMs float64
	forward := func(t *webrtc.TrackRemote) {
		buf := make([]byte, 1500)
		for {
			n, _, err := t.Read(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			buf[1] = buf[1]&0x80 | 96
			dst.Write(buf[:n])
			c, now := cpuS(), nowMs()
			mu.Lock()
			packetsOut++
			lastCPU, lastMs = c, now
			mu.Unlock()
		}
	}
	p, err := newPairWith(mediaAPI, func(p *pair) error {
		sender, err := p.a.AddTrack(track)
		if err != nil {
			return err
		}
		// RTCP from the receiver (NACK, PLI, reports) reaches the
		// interceptors only while someone reads it.
		go func() {
			buf := make([]byte, 1500)
			for {
				if _, _, err := sender.Read(buf); err != nil {
					return
				}
			}
		}()
		p.b.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
			go forward(t)
		})
		return nil
	})
	if err != nil || !p.wait(30*time.Second) {
		fmt.Fprintln(os.Stderr, "call: the pair did not connect")
		return false
	}
	defer p.close()

	src, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "call:", err)
		return false
	}
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"in_port": src.LocalAddr().(*net.UDPAddr).Port})

	go func() {
		buf := make([]byte, 1500)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			c, now := cpuS(), nowMs()
			mu.Lock()
			if packetsIn == 0 {
				firstCPU, firstMs = c, now
			}
			packetsIn++
			mu.Unlock()
			track.Write(buf[:n])
		}
	}()
	io.Copy(io.Discard, os.Stdin)
	src.Close()

	mu.Lock()
	defer mu.Unlock()
	out["packets_in"], out["packets_out"] = packetsIn, packetsOut
	if packetsOut > 0 && lastMs > firstMs {
		out["cpu_s"], out["seconds"] = lastCPU-firstCPU, (lastMs-firstMs)/1000
	}
	return packetsOut > 0
}

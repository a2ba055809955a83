package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"testing"
	"time"
)

func TestSignalsRecordAForcedGCPauseAndTheHeap(t *testing.T) {
	var out bytes.Buffer
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { writeSignals(&out, newSignalSampler(), 20*time.Millisecond, stop); close(done) }()
	time.Sleep(30 * time.Millisecond)
	runtime.GC()
	time.Sleep(60 * time.Millisecond)
	close(stop)
	<-done
	kinds := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var sample map[string]any
		if err := json.Unmarshal(line, &sample); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		kinds[sample["kind"].(string)]++
		if sample["kind"] == "gc_pause" && sample["value"].(float64) <= 0 {
			t.Errorf("a pause of %v ms", sample["value"])
		}
	}
	if kinds["gc_pause"] == 0 || kinds["heap_used"] == 0 {
		t.Fatalf("kinds seen: %v", kinds)
	}
}

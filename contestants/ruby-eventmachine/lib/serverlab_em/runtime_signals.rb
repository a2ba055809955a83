# frozen_string_literal: true

require "json"

module ServerlabEM
  # Runtime signals for serverlab's side file (--signals-file): Ruby's own
  # figures written as JSON lines, one object per sample, so that a GC pause
  # or a late reactor can be laid over the load's timeline without asking
  # this server over HTTP (a blocked reactor could not answer).
  #
  # Every 100 ms a reactor timer writes: each GC since the last tick
  # (GC::Profiler's record of it: its time, major or minor, the heap in use),
  # the reactor's lag (how late this very timer fired), and GC.stat's heap.
  class RuntimeSignals
    INTERVAL_S = 0.1

    def self.start(path)
      new(File.open(path, "a")).tap(&:start)
    end

    def initialize(out)
      @out = out
      @out.sync = true
    end

    def start
      GC::Profiler.enable
      GC::Profiler.clear
      @last = monotonic
      EM.add_periodic_timer(INTERVAL_S) { tick }
    end

    def tick
      now = monotonic
      t = Time.now.to_f.round(4)
      lines = gc_lines(t)
      lines << { t: t, kind: "loop_delay", value: ms([now - @last - INTERVAL_S, 0].max), pid: Process.pid }
      lines << heap_line(t)
      @last = now
      # One write per tick: a few hundred bytes.
      @out.write(lines.map { |line| JSON.generate(line) }.join("\n") << "\n")
    end

    private

    def gc_lines(time)
      records = GC::Profiler.raw_data || []
      GC::Profiler.clear
      records.map do |gc|
        major = gc[:GC_FLAGS].is_a?(Hash) && gc[:GC_FLAGS].key?(:major_by) && gc[:GC_FLAGS][:major_by]
        { t: time, kind: "gc_pause", value: ms(gc[:GC_TIME]), gc: major ? "major" : "minor",
          heap_used: gc[:HEAP_USE_SIZE], pid: Process.pid }
      end
    end

    def heap_line(time)
      stat = GC.stat
      { t: time, kind: "heap_live_slots", value: stat[:heap_live_slots], gc_count: stat[:count],
        gc_time_ms: stat[:time], pid: Process.pid }
    end

    def ms(seconds)
      (seconds * 1000).round(3)
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end

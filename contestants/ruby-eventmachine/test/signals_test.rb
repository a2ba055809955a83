# frozen_string_literal: true

require_relative "live_server"

# --signals-file (the manifest's {signals_file}): GC pauses, reactor lag and
# the heap, appended as JSON lines while the server works.
class SignalsTest < Minitest::Test
  include LiveServerClient

  FILE = File.join(Dir.mktmpdir("ruby-em-signals"), "signals.jsonl")

  def server
    LiveServer.with("--signals-file", FILE)
  end

  def lines
    File.readlines(FILE).map { |line| JSON.parse(line) }
  end

  def of(kind)
    lines.select { |line| line["kind"] == kind }
  end

  def test_the_side_file_records_gc_pauses_reactor_lag_and_the_heap
    # Enough requests that the heap fills and Ruby collects at least once.
    http { |client| 600.times { client.get("/perf") } }
    assert eventually(5) { !of("gc_pause").empty? && !of("loop_delay").empty? }
    assert(of("gc_pause").all? { |line| line["value"] >= 0 && line["value"] < 10_000 })
    assert(of("loop_delay").all? { |line| line["value"] >= 0 && line["value"] < 10_000 })
    assert(of("heap_live_slots").all? { |line| line["value"].positive? })
    assert(lines.all? { |line| (line["t"] - Time.now.to_f).abs < 120 }, "times are not Unix seconds")
  end
end

# frozen_string_literal: true

require "time"

module ServerlabEM
  # Wall-clock milliseconds, the unit of every timestamp in the spec.
  module Clock
    def self.now_ms
      Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
    end
  end

  # HTTP dates have one-second resolution, so one formatted string serves every
  # response sent within the same second.
  module HttpDate
    @second = nil
    @value = nil

    def self.current
      second = Process.clock_gettime(Process::CLOCK_REALTIME, :second)
      unless second == @second
        @second = second
        @value = Time.at(second).httpdate.freeze
      end
      @value
    end
  end
end

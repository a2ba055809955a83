# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # Streams an open file into a connection in fixed-size reads scheduled on the
  # reactor. It refills only while EM's outbound buffer is below a high-water
  # mark, so a slow reader costs one chunk of memory, not the whole file; and
  # unlike EM::FileStreamer it stops the moment the client goes away.
  class FileStream
    HIGH_WATER = 256 * 1024
    # While the client is not draining its buffer, look again after this long
    # rather than spinning the reactor with next_tick.
    BACKOFF_S = 0.001

    def initialize(connection, file, chunk_size, &on_done)
      @connection = connection
      @file = file
      @chunk_size = chunk_size
      @on_done = on_done
      @stopped = false
    end

    def start
      pump
    end

    # The connection closed: release the file; no more reads.
    def stop
      @stopped = true
      @file.close unless @file.closed?
    end

    private

    def pump
      return if @stopped

      while @connection.get_outbound_data_size < HIGH_WATER
        chunk = @file.read(@chunk_size)
        return finish unless chunk

        @connection.send_data(chunk)
      end
      EM.add_timer(BACKOFF_S) { pump }
    end

    def finish
      stop
      @on_done.call
    end
  end
end

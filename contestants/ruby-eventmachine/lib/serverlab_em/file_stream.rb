# frozen_string_literal: true

require "eventmachine"

module ServerlabEM
  # Streams an open file into a connection in fixed-size reads scheduled on the
  # reactor. It refills only while EM's outbound buffer is below a high-water
  # mark, so a slow reader costs that much memory, not the whole file; and
  # unlike EM::FileStreamer it stops the moment the client goes away.
  class FileStream
    HIGH_WATER = 256 * 1024
    # While the client is not draining its buffer, look again after a pause
    # rather than spinning the reactor with next_tick; the pause doubles while
    # the client stays stalled, so many slow readers cost few wake-ups.
    FIRST_BACKOFF_S = 0.001
    MAX_BACKOFF_S = 0.032

    def initialize(connection, file, chunk_size, &on_done)
      @connection = connection
      @file = file
      @chunk_size = chunk_size
      @on_done = on_done
      @stopped = false
      @backoff_s = FIRST_BACKOFF_S
      # EM copies what send_data is given, so one read buffer serves every chunk.
      @chunk = String.new(capacity: chunk_size, encoding: Encoding::BINARY)
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

      sent = false
      while @connection.get_outbound_data_size < HIGH_WATER
        return finish unless @file.read(@chunk_size, @chunk)

        @connection.send_data(@chunk)
        sent = true
      end
      schedule_pump(sent)
    end

    # A client that took data gets the next chunk on the next reactor turn;
    # a stalled one is polled with a growing pause.
    def schedule_pump(client_took_data)
      if client_took_data
        @backoff_s = FIRST_BACKOFF_S
        EM.next_tick { pump }
      else
        EM.add_timer(@backoff_s) { pump }
        @backoff_s = [@backoff_s * 2, MAX_BACKOFF_S].min
      end
    end

    def finish
      stop
      @on_done.call
    end
  end
end

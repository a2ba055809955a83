# frozen_string_literal: true

require "minitest/autorun"
require "socket"
require_relative "../lib/serverlab_em"

# A push delivery's `sent` is taken right before the write that hands it to
# the kernel (spec §6). EM's send_data only buffers until the reactor's next
# turn, so HttpConnection#write_now writes the descriptor itself; these
# tests read a plain client socket from inside one reactor callback, where
# EM cannot have written anything.
class WriteNowTest < Minitest::Test
  # The server side of the one connection, once EM has accepted it.
  class Accepted < ServerlabEM::HttpConnection
    class << self
      attr_accessor :last
    end

    def post_init
      super
      Accepted.last = self
    end
  end

  # Runs the block in a reactor turn with the accepted connection and a
  # blocking client socket connected to it.
  def with_connection
    Accepted.last = nil
    app = ServerlabEM::App.new(name: "test", docroot: nil, chunk_size: 65_536)
    EM.run do
      server = EM.start_server("127.0.0.1", 0, Accepted, app)
      client = TCPSocket.new("127.0.0.1", Socket.unpack_sockaddr_in(EM.get_sockname(server)).first)
      poll = EM.add_periodic_timer(0.01) do
        next unless Accepted.last

        poll.cancel
        yield Accepted.last, client
      end
    end
  end

  def read_now(client, wait_s)
    client.wait_readable(wait_s) ? client.read_nonblock(1024) : nil
  end

  def test_a_delivery_written_now_reaches_the_client_before_the_reactor_takes_another_turn
    with_connection do |connection, client|
      connection.write_now("now\n")
      assert_equal "now\n", read_now(client, 1)
      connection.send_data("buffered\n")
      assert_nil read_now(client, 0.2), "send_data waits for the reactor's next turn"
      EM.stop
    end
  end

  def test_a_delivery_never_overtakes_bytes_still_in_ems_buffer
    with_connection do |connection, client|
      connection.send_data("first\n")
      connection.write_now("second\n")
      EM.next_tick do
        EM.add_timer(0.05) do
          assert_equal "first\nsecond\n", read_now(client, 1)
          EM.stop
        end
      end
    end
  end
end

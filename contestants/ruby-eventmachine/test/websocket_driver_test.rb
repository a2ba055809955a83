# frozen_string_literal: true

require "minitest/autorun"
require_relative "../lib/serverlab_em"

# ServerlabEM::WebSocketDriver writes its frames itself: they must be the
# bytes the Debian driver's own writer produces, at every length boundary.
class WebSocketDriverTest < Minitest::Test
  # The driver's socket: the request env of a valid upgrade, and what it writes.
  class Peer
    attr_reader :env, :written

    def initialize
      @env = { "HTTP_SEC_WEBSOCKET_KEY" => "dGhlIHNhbXBsZSBub25jZQ==", "HTTP_SEC_WEBSOCKET_VERSION" => "13" }
      @written = []
    end

    def write(data)
      @written << data
    end
  end

  def frames_of(driver_class)
    peer = Peer.new
    driver = driver_class.new(peer, require_masking: true)
    driver.start
    # Sizes in bytes ("é" is two), around the 7-, 16- and 64-bit lengths.
    [0, 125, 126, 65_535, 65_536].each { |size| driver.text(size.zero? ? "" : "é#{'x' * (size - 2)}") }
    driver.ping("ping")
    driver.close("done", 1000)
    peer.written.drop(1)
  end

  def test_frames_match_the_library_writer
    assert_equal frames_of(::WebSocket::Driver::Hybi), frames_of(ServerlabEM::WebSocketDriver)
  end
end

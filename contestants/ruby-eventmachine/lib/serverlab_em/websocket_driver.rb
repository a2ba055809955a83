# frozen_string_literal: true

require "websocket/driver"

module ServerlabEM
  # Debian 12's ruby-websocket-driver (0.6.3) as spec §11 needs it. It frames
  # and parses RFC 6455 for a socket that only has to offer #env and #write,
  # which lets it run inside an existing EM connection; em-websocket would
  # want a listener of its own. Three things are changed here, each in the
  # driver's own terms:
  class WebSocketDriver < ::WebSocket::Driver::Hybi
    # Writes a frame. 0.6.3 turns every payload into an array of bytes and
    # back (38 us for a 300-byte delivery, 7 ms for 64 KiB); upstream 0.7.4
    # replaced that by String#pack, as here. A server never masks and this
    # one negotiates no extension, so a frame is its header and the payload.
    def frame(buffer, type = nil, code = nil)
      return super unless @ready_state == 1 && buffer.is_a?(String)

      payload = code ? [code, buffer].pack("S>a*") : buffer.b
      @socket.write(frame_header(OPCODES[type || :text], payload.bytesize) << payload)
      true
    end

    private

    def frame_header(opcode, length)
      if length <= 125
        [FIN | opcode, length].pack("CC")
      elsif length <= 65_535
        [FIN | opcode, 126, length].pack("CCn")
      else
        [FIN | opcode, 127, length].pack("CCQ>")
      end
    end

    # An unmasked client frame is a protocol error (RFC 6455 §5.1: 1002);
    # 0.6.3 closes with 1003, which spec §11 keeps for binary messages.
    def parse_length(octet)
      return fail(:protocol_error, "client frames must be masked") if (octet & MASK).zero?

      super
    end

    # A close frame without a status code is answered with none (spec §11,
    # RFC 6455 §5.5.1 echoes the code it got); 0.6.3 answers 1000.
    def emit_frame(buffer)
      return super unless @frame.opcode == OPCODES[:close] && buffer.empty?

      @frame = nil
      shutdown(nil, "")
    end
  end
end

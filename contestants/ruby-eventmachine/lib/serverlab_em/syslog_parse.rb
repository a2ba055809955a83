# frozen_string_literal: true

require "strscan"

module ServerlabEM
  # Syslog parsing (spec §7.1, part syslog-parse): RFC 5424, and RFC 3164
  # where the message is in that form, strictly. The spec's rules of what is
  # malformed are exact (VERSION 1 only, a PRI of at most 191, a BOM followed
  # by UTF-8) so that every contestant counts the same messages malformed; a
  # gem's own reading of the RFCs would differ, and Debian ships none.
  #
  # Each part of the header is one regexp run by Onigmo in C through a reused
  # StringScanner, whose #skip makes no MatchData: a byte loop in Ruby, or a
  # MatchData and a String per field, cost a flood several times more. The
  # fields are copied out only when asked (keep_fields), as the tests do.
  class SyslogParse
    # One parsed message. A nil field ("-") is nil; `msg` has no BOM.
    Message = Struct.new(:pri, :timestamp, :host, :app, :procid, :msgid, :sd_elements, :msg, :rfc3164)

    MAX_PRI = 191
    TIMESTAMP_5424 = '(-|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d))'
    # VERSION 1, then TIMESTAMP HOSTNAME APP-NAME PROCID MSGID, each printable
    # US-ASCII within RFC 5424's lengths and followed by one SP.
    HEADER_5424 = /1 #{TIMESTAMP_5424} ([!-~]{1,255}) ([!-~]{1,48}) ([!-~]{1,128}) ([!-~]{1,32}) /n
    # SD-NAME: 1-32 printable octets but '=', ']' and '"'; a PARAM-VALUE
    # escapes '"', '\' and ']' with '\' and has none of them bare.
    SD_NAME = '[!#-<>-\\\\^-~]{1,32}'
    SD_ELEMENT = /\[#{SD_NAME}(?: #{SD_NAME}="(?:[^"\\\]]|\\["\\\]])*")*\]/n
    # TIMESTAMP HOSTNAME SP, then TAG (APP-NAME, [PROCID]) and ':' if present.
    HEADER_3164 = %r{((?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 1-3]\d \d\d:\d\d:\d\d) ([!-~]{1,255}) (?:([A-Za-z0-9_./-]{1,32})(?:\[([!-Z^-~]{1,128})\])?: ?)?}n
    BOM = [0xEF, 0xBB, 0xBF].freeze
    LT = 0x3C
    GT = 0x3E
    SP = 0x20
    DASH = 0x2D
    DIGIT_ZERO = 0x30
    DIGIT_ONE = 0x31
    DIGIT_NINE = 0x39

    # What the last #parse found: its SD-ELEMENTs and whether it was RFC 3164.
    attr_reader :sd_elements, :rfc3164

    def initialize
      @scanner = StringScanner.new(String.new(encoding: Encoding::BINARY))
    end

    # The message (a binary String) parsed into a Message, or nil if malformed.
    def self.parse(text)
      parser = new
      parser.message(text)
    end

    # The octets of the message's MSG (BOM excluded), or nil if the spec calls
    # it malformed; #sd_elements and #rfc3164 then describe it.
    def parse(text, keep_fields: false)
      @fields = nil
      pri = pri_end(text)
      return nil unless pri

      @scanner.string = text
      @scanner.pos = pri
      first = text.getbyte(pri)
      if first && first >= DIGIT_ONE && first <= DIGIT_NINE
        parse_5424(text, keep_fields)
      else
        parse_3164(text, keep_fields)
      end
    end

    # #parse, with the fields copied out.
    def message(text)
      msg_bytes = parse(text, keep_fields: true)
      return nil unless msg_bytes

      msg = text.byteslice(text.bytesize - msg_bytes, msg_bytes)
      Message.new(text[1...text.index(">")].to_i, *@fields, @sd_elements, msg, @rfc3164)
    end

    private

    # PRI: "<", 1-3 digits without a leading zero (or "0"), ">", at most 191;
    # the position after it.
    def pri_end(text)
      return nil unless text.getbyte(0) == LT

      value = 0
      position = 1
      while position <= 4 && (byte = text.getbyte(position)) && byte >= DIGIT_ZERO && byte <= DIGIT_NINE
        return nil if position == 2 && value.zero? # a leading zero

        value = (value * 10) + byte - DIGIT_ZERO
        position += 1
      end
      return nil if position == 1 || position > 4 || value > MAX_PRI || text.getbyte(position) != GT

      position + 1
    end

    def parse_5424(text, keep_fields)
      return nil unless @scanner.skip(HEADER_5424)

      @fields = (1..5).map { |group| @scanner[group] == "-" ? nil : @scanner[group] } if keep_fields
      @rfc3164 = false
      return nil unless structured_data(text)

      message_5424(text, @scanner.pos)
    end

    # Counts the SD-ELEMENTs into @sd_elements; false if malformed.
    def structured_data(text)
      @sd_elements = 0
      if text.getbyte(@scanner.pos) == DASH
        @scanner.pos += 1
        return true
      end
      @sd_elements += 1 while @scanner.skip(SD_ELEMENT)
      @sd_elements.positive?
    end

    # After the structured data: the end, or SP and MSG; a MSG that starts
    # with the BOM must be UTF-8 after it. MSG's octets, or nil.
    def message_5424(text, position)
      size = text.bytesize
      return 0 if position == size
      return nil unless text.getbyte(position) == SP

      start = position + 1
      return size - start unless bom_at?(text, start)

      rest = text.byteslice(start + 3, size - start - 3)
      rest.force_encoding(Encoding::UTF_8).valid_encoding? ? rest.bytesize : nil
    end

    def bom_at?(text, position)
      text.getbyte(position) == BOM[0] && text.getbyte(position + 1) == BOM[1] && text.getbyte(position + 2) == BOM[2]
    end

    def parse_3164(text, keep_fields)
      return nil unless @scanner.skip(HEADER_3164)

      @fields = [@scanner[1], @scanner[2], @scanner[3], @scanner[4], nil] if keep_fields
      @sd_elements = 0
      @rfc3164 = true
      text.bytesize - @scanner.pos
    end
  end
end

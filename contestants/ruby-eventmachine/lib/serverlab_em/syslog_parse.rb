# frozen_string_literal: true

module ServerlabEM
  # Syslog parsing (spec §7.1, part syslog-parse): RFC 5424, and RFC 3164
  # where the message is in that form, strictly. The spec's rules of what is
  # malformed are exact (VERSION 1 only, a PRI of at most 191, a BOM followed
  # by UTF-8) so that every contestant counts the same messages malformed; a
  # gem's own reading of the RFCs would differ, and Debian ships none. Each
  # part is one anchored regexp, matched by Onigmo in C on the message's
  # binary bytes: a byte loop in Ruby would cost a flood far more.
  module SyslogParse
    # One parsed message. A nil field ("-") is nil; `msg` has no BOM.
    Message = Struct.new(:pri, :timestamp, :host, :app, :procid, :msgid, :sd_elements, :msg, :rfc3164)

    PRI = /\A<(0|[1-9][0-9]{0,2})>/n
    MAX_PRI = 191
    TIMESTAMP_5424 = '(-|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d))'
    # VERSION 1, then TIMESTAMP HOSTNAME APP-NAME PROCID MSGID, each printable
    # US-ASCII within RFC 5424's lengths and followed by one SP.
    HEADER_5424 = /\G1 #{TIMESTAMP_5424} ([!-~]{1,255}) ([!-~]{1,48}) ([!-~]{1,128}) ([!-~]{1,32}) /n
    # SD-NAME: 1-32 printable octets but '=', ']' and '"'; a PARAM-VALUE
    # escapes '"', '\' and ']' with '\' and has none of them bare.
    SD_NAME = '[!#-<>-\\\\^-~]{1,32}'
    SD_ELEMENT = /\G\[#{SD_NAME}(?: #{SD_NAME}="(?:[^"\\\]]|\\["\\\]])*")*\]/n
    HEADER_3164 = %r{\G((?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 1-3]\d \d\d:\d\d:\d\d) ([!-~]{1,255}) (?:([A-Za-z0-9_./-]{1,32})(?:\[([!-Z^-~]{1,128})\])?: ?)?}n
    BOM = "\xEF\xBB\xBF".b.freeze
    NIL = "-"
    SP = 0x20
    DIGIT_ONE = 0x31
    DIGIT_NINE = 0x39

    # The message (a binary String) parsed, or nil if the spec calls it malformed.
    def self.parse(text)
      pri = PRI.match(text)
      return nil unless pri && (value = pri[1].to_i) <= MAX_PRI

      start = pri.end(0)
      first = text.getbyte(start)
      if first && first >= DIGIT_ONE && first <= DIGIT_NINE
        parse_5424(text, start, value)
      else
        parse_3164(text, start, value)
      end
    end

    def self.parse_5424(text, start, pri)
      header = HEADER_5424.match(text, start)
      return nil unless header

      elements, position = structured_data(text, header.end(0))
      return nil unless elements

      msg = message_5424(text, position)
      return nil unless msg

      fields = (1..5).map { |group| header[group] == NIL ? nil : header[group] }
      Message.new(pri, *fields, elements, msg, false)
    end

    # SD-ELEMENTs counted, and the position after them; nil if malformed.
    def self.structured_data(text, position)
      return [0, position + 1] if text.getbyte(position) == NIL.ord

      elements = 0
      while (element = SD_ELEMENT.match(text, position))
        elements += 1
        position = element.end(0)
      end
      elements.zero? ? nil : [elements, position]
    end

    # After the structured data: the end, or SP and MSG; a MSG that starts
    # with the BOM must be UTF-8 after it.
    def self.message_5424(text, position)
      return "".b if position == text.bytesize
      return nil unless text.getbyte(position) == SP

      msg = text.byteslice(position + 1, text.bytesize - position - 1)
      return msg unless msg.start_with?(BOM)

      msg = msg.byteslice(BOM.bytesize, msg.bytesize - BOM.bytesize)
      msg.dup.force_encoding(Encoding::UTF_8).valid_encoding? ? msg : nil
    end

    def self.parse_3164(text, start, pri)
      header = HEADER_3164.match(text, start)
      return nil unless header

      msg = text.byteslice(header.end(0), text.bytesize - header.end(0))
      Message.new(pri, header[1], header[2], header[3], header[4], nil, 0, msg, true)
    end
    private_class_method :parse_5424, :structured_data, :message_5424, :parse_3164
  end
end

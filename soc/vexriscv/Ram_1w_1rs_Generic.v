// Ram_1w_1rs: the one black-boxed memory of a VexRiscv-SMP cluster netlist
// (the data cache's ways, with a byte write mask), as SpinalHDL's
// blackboxByteEnables policy instantiates it. A behavioural model for the
// simulator and for Yosys (which maps it to block RAM): one write port with
// an optional lane mask, one synchronous read port with an enable. LiteX
// adds it to the design from the data package as Ram_1w_1rs_Generic.v
// (soc/vexriscv/smp-cluster.sh puts this file there).
//
// Only what the cluster uses is modelled: one clock (clockCrossing is
// ignored), equal read and write widths (a mismatch stops elaboration), a
// read of the word being written returns either value (readUnderWrite
// "dontCare").
module Ram_1w_1rs #(
    parameter integer wordCount = 0,
    parameter integer wordWidth = 0,
    parameter clockCrossing = 1'b0,
    parameter technology = "auto",
    parameter readUnderWrite = "dontCare",
    parameter integer wrAddressWidth = 0,
    parameter integer wrDataWidth = 0,
    parameter integer wrMaskWidth = 0,
    parameter wrMaskEnable = 1'b0,
    parameter integer rdAddressWidth = 0,
    parameter integer rdDataWidth = 0
) (
    input wire wr_clk,
    input wire wr_en,
    input wire [wrMaskWidth-1:0] wr_mask,
    input wire [wrAddressWidth-1:0] wr_addr,
    input wire [wrDataWidth-1:0] wr_data,
    input wire rd_clk,
    input wire rd_en,
    input wire [rdAddressWidth-1:0] rd_addr,
    output wire [rdDataWidth-1:0] rd_data
);
  localparam integer LANE = wrDataWidth / wrMaskWidth;

  generate
    if (rdDataWidth != wrDataWidth || rdAddressWidth != wrAddressWidth) begin : g_unsupported
      Ram_1w_1rs_needs_equal_read_and_write_ports unsupported ();
    end
  endgenerate

  reg [wrDataWidth-1:0] ram[0:wordCount-1];
  reg [rdDataWidth-1:0] rd_word;
  assign rd_data = rd_word;

  integer lane;
  always @(posedge wr_clk) begin
    if (wr_en) begin
      for (lane = 0; lane < wrMaskWidth; lane = lane + 1) begin
        if (!wrMaskEnable || wr_mask[lane]) begin
          ram[wr_addr][lane*LANE+:LANE] <= wr_data[lane*LANE+:LANE];
        end
      end
    end
  end

  always @(posedge rd_clk) begin
    if (rd_en) begin
      rd_word <= ram[rd_addr];
    end
  end
endmodule

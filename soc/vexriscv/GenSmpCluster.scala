// Writes the Verilog of a VexRiscv-SMP cluster for LiteX 2024.12's
// `vexriscv_smp` CPU (VexRiscvLitexSmpCluster, from the VexRiscv sources
// inside the pythondata-cpu-vexriscv wheel), accepting every option LiteX
// 2024.12 passes to its cluster generator:
//
//   GenSmpCluster --netlist-directory=DIR --netlist-name=NAME [--key=value...]
//
// The wheel's own command-line generator lacks five of them: here
// --reset-vector is honoured (the cores start there), and --expose-time,
// --privileged-debug, --hardware-breakpoints and --jtag-tap are accepted at
// the values this cluster has (no time output, the wheel's debug plugin, no
// JTAG TAP; any hardware-breakpoint count, as the wheel's debug plugin has
// none to configure). Other values are refused (exit 2) rather than ignored,
// as is --wishbone-force-32b=True. Compiled by soc/vexriscv/smp-cluster.sh.
package aesd

import spinal.core._
import spinal.lib.bus.misc.SizeMapping
import vexriscv.demo.smp.{LiteDramNativeParameter, VexRiscvLitexSmpCluster,
  VexRiscvLitexSmpClusterParameter, VexRiscvSmpClusterParameter}
import vexriscv.demo.smp.VexRiscvSmpClusterGen.vexRiscvConfig
import vexriscv.plugin.AesPlugin

object GenSmpCluster {
  /** The cluster's settings, with the wheel generator's defaults. */
  case class Options(
    cpuCount: Int = 1,
    resetVector: Long = 0L,
    iBusWidth: Int = 64,
    dBusWidth: Int = 64,
    iCacheSize: Int = 8192,
    dCacheSize: Int = 8192,
    iCacheWays: Int = 2,
    dCacheWays: Int = 2,
    liteDramWidth: Int = 128,
    coherentDma: Boolean = false,
    wishboneMemory: Boolean = false,
    outOfOrderDecoder: Boolean = true,
    aesInstruction: Boolean = false,
    fpu: Boolean = false,
    cpuPerFpu: Int = 4,
    rvc: Boolean = false,
    iTlbSize: Int = 4,
    dTlbSize: Int = 4,
    netlistDirectory: String = ".",
    netlistName: String = "VexRiscvLitexSmpCluster"
  )

  private def fail(message: String): Nothing = {
    System.err.println(s"GenSmpCluster: $message")
    sys.exit(2)
  }

  private def bool(key: String, value: String): Boolean = value.toLowerCase match {
    case "true" | "1" => true
    case "false" | "0" | "none" => false
    case _ => fail(s"--$key needs True or False, not '$value'")
  }

  private def int(key: String, value: String): Int =
    try Integer.decode(value).intValue
    catch { case _: NumberFormatException => fail(s"--$key needs a number, not '$value'") }

  private def long(key: String, value: String): Long =
    try java.lang.Long.decode(value).longValue
    catch { case _: NumberFormatException => fail(s"--$key needs a number, not '$value'") }

  /** Parses LiteX's `--key=value` (and bare `--coherent-dma`) arguments. */
  def parse(args: Seq[String]): Options = args.foldLeft(Options()) { (o, arg) =>
    val (key, value) = arg.stripPrefix("--").split("=", 2) match {
      case Array(k, v) if arg.startsWith("--") => (k, v)
      case Array(k) if arg.startsWith("--") => (k, "True")
      case _ => fail(s"unexpected argument '$arg'")
    }
    key match {
      case "cpu-count" => o.copy(cpuCount = int(key, value))
      case "reset-vector" => o.copy(resetVector = long(key, value))
      case "ibus-width" => o.copy(iBusWidth = int(key, value))
      case "dbus-width" => o.copy(dBusWidth = int(key, value))
      case "icache-size" => o.copy(iCacheSize = int(key, value))
      case "dcache-size" => o.copy(dCacheSize = int(key, value))
      case "icache-ways" => o.copy(iCacheWays = int(key, value))
      case "dcache-ways" => o.copy(dCacheWays = int(key, value))
      case "litedram-width" => o.copy(liteDramWidth = int(key, value))
      case "coherent-dma" => o.copy(coherentDma = bool(key, value))
      case "wishbone-memory" => o.copy(wishboneMemory = bool(key, value))
      case "out-of-order-decoder" => o.copy(outOfOrderDecoder = bool(key, value))
      case "aes-instruction" => o.copy(aesInstruction = bool(key, value))
      case "fpu" => o.copy(fpu = bool(key, value))
      case "cpu-per-fpu" => o.copy(cpuPerFpu = int(key, value))
      case "rvc" => o.copy(rvc = bool(key, value))
      case "itlb-size" => o.copy(iTlbSize = int(key, value))
      case "dtlb-size" => o.copy(dTlbSize = int(key, value))
      case "netlist-directory" => o.copy(netlistDirectory = value)
      case "netlist-name" => o.copy(netlistName = value)
      case "hardware-breakpoints" => int(key, value); o
      case "expose-time" | "privileged-debug" | "jtag-tap" | "wishbone-force-32b" =>
        if (bool(key, value)) fail(s"--$key=$value: this cluster has no such feature (only False is accepted)")
        o
      case _ => fail(s"unknown option --$key")
    }
  }

  /** LiteX's cluster for these options (as the wheel's command-line generator builds it). */
  def parameter(o: Options): VexRiscvLitexSmpClusterParameter = {
    val coherency = o.coherentDma || o.cpuCount > 1
    VexRiscvLitexSmpClusterParameter(
      cluster = VexRiscvSmpClusterParameter(
        cpuConfigs = List.tabulate(o.cpuCount) { hartId =>
          val config = vexRiscvConfig(
            hartId = hartId,
            ioRange = address => address.msb,
            resetVector = o.resetVector,
            iBusWidth = o.iBusWidth,
            dBusWidth = o.dBusWidth,
            iCacheSize = o.iCacheSize,
            dCacheSize = o.dCacheSize,
            iCacheWays = o.iCacheWays,
            dCacheWays = o.dCacheWays,
            coherency = coherency,
            iBusRelax = true,
            earlyBranch = true,
            withFloat = o.fpu,
            withDouble = o.fpu,
            externalFpu = o.fpu,
            loadStoreWidth = if (o.fpu) 64 else 32,
            rvc = o.rvc,
            injectorStage = o.rvc,
            iTlbSize = o.iTlbSize,
            dTlbSize = o.dTlbSize
          )
          if (o.aesInstruction) config.add(new AesPlugin)
          config
        },
        withExclusiveAndInvalidation = coherency,
        forcePeripheralWidth = !o.wishboneMemory,
        outOfOrderDecoder = o.outOfOrderDecoder,
        fpu = o.fpu,
        jtagHeaderIgnoreWidth = 0
      ),
      liteDram = LiteDramNativeParameter(addressWidth = 32, dataWidth = o.liteDramWidth),
      liteDramMapping = SizeMapping(0x40000000L, 0x40000000L),
      coherentDma = o.coherentDma,
      wishboneMemory = o.wishboneMemory,
      cpuPerFpu = o.cpuPerFpu
    )
  }

  def main(args: Array[String]): Unit = {
    val o = parse(args.toSeq)
    if (!Seq(1, 2, 4, 8).contains(o.cpuCount)) fail(s"--cpu-count=${o.cpuCount}: 1, 2, 4 or 8")
    val config = SpinalConfig(targetDirectory = o.netlistDirectory, inlineRom = true)
      .addStandardMemBlackboxing(blackboxByteEnables)
    config.generateVerilog {
      val top = new Component {
        val body = new VexRiscvLitexSmpCluster(p = parameter(o))
        body.setName("")
      }
      top.setDefinitionName(o.netlistName)
    }
  }
}

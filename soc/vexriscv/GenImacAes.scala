// Writes the Verilog of a VexRiscv "imac" core (the configuration LiteX's
// pythondata-cpu-vexriscv builds as VexRiscv_IMAC.v: rv32imac, 4 KiB
// direct-mapped instruction and data caches, all CSRs, Wishbone buses,
// external interrupt array) with VexRiscv's AesPlugin added, or without it.
//
//   GenImacAes <output.v> [--no-aes]
//
// Compiled by soc/vexriscv/generate.sh against the VexRiscv sources inside
// the pythondata-cpu-vexriscv wheel; the AesPlugin is that wheel's, with its
// default encoding (custom-0). The ROM is inlined in the netlist (no .bin
// file beside it), so the one .v file is the whole core.
package aesd

import java.io.File

import spinal.core._
import vexriscv.{VexRiscv, VexRiscvConfig, plugin}
import vexriscv.ip.{DataCacheConfig, InstructionCacheConfig}
import vexriscv.plugin._

object GenImacAes {
  /** The plugins of the imac configuration, in the order the wheel's generator uses. */
  def imacPlugins(): List[Plugin[VexRiscv]] = List(
    new IBusCachedPlugin(
      resetVector = null,
      relaxedPcCalculation = false,
      prediction = STATIC,
      compressedGen = true,
      memoryTranslatorPortConfig = null,
      config = InstructionCacheConfig(
        cacheSize = 4096,
        bytePerLine = 32,
        wayCount = 1,
        addressWidth = 32,
        cpuDataWidth = 32,
        memDataWidth = 32,
        catchIllegalAccess = true,
        catchAccessFault = true,
        asyncTagMemory = false,
        twoCycleRam = false,
        twoCycleCache = false
      )
    ),
    new DBusCachedPlugin(
      dBusCmdMasterPipe = true,
      dBusCmdSlavePipe = true,
      dBusRspSlavePipe = false,
      relaxedMemoryTranslationRegister = false,
      config = new DataCacheConfig(
        cacheSize = 4096,
        bytePerLine = 32,
        wayCount = 1,
        addressWidth = 32,
        cpuDataWidth = 32,
        memDataWidth = 32,
        catchAccessError = true,
        catchIllegal = true,
        catchUnaligned = true,
        withLrSc = true,
        withAmo = false,
        earlyWaysHits = true
      ),
      memoryTranslatorPortConfig = null,
      csrInfo = true
    ),
    new StaticMemoryTranslatorPlugin(ioRange = _.msb),
    new DecoderSimplePlugin(catchIllegalInstruction = true),
    new RegFilePlugin(regFileReadyKind = plugin.SYNC, zeroBoot = false),
    new IntAluPlugin,
    new SrcPlugin(separatedAddSub = false, executeInsertion = true),
    new FullBarrelShifterPlugin,
    new HazardSimplePlugin(
      bypassExecute = true,
      bypassMemory = true,
      bypassWriteBack = true,
      bypassWriteBackBuffer = true,
      pessimisticUseSrc = false,
      pessimisticWriteRegFile = false,
      pessimisticAddressMatch = false
    ),
    new BranchPlugin(earlyBranch = false, catchAddressMisaligned = true),
    new CsrPlugin(CsrPluginConfig.all(mtvecInit = null)),
    new MulPlugin,
    new DivPlugin,
    new ExternalInterruptArrayPlugin(
      machineMaskCsrId = 0xBC0,
      machinePendingsCsrId = 0xFC0,
      supervisorMaskCsrId = 0x9C0,
      supervisorPendingsCsrId = 0xDC0
    )
  )

  def main(args: Array[String]): Unit = {
    val (output, withAes) = args.toList match {
      case path :: Nil => (new File(path), true)
      case path :: "--no-aes" :: Nil => (new File(path), false)
      case _ =>
        System.err.println("usage: GenImacAes <output.v> [--no-aes]")
        sys.exit(2)
    }
    val plugins = imacPlugins() ++ (if (withAes) List(new AesPlugin) else Nil)
    val config = spinal.core.SpinalConfig(
      defaultConfigForClockDomains = ClockDomainConfig(resetKind = spinal.core.SYNC),
      targetDirectory = Option(output.getAbsoluteFile.getParent).getOrElse("."),
      netlistFileName = output.getName,
      inlineRom = true
    )
    config.generateVerilog {
      val cpu = new VexRiscv(VexRiscvConfig(plugins))
      // Wishbone buses named as LiteX expects them (iBusWishbone, dBusWishbone).
      cpu.rework {
        for (p <- cpu.plugins) p match {
          case bus: IBusCachedPlugin =>
            bus.iBus.setAsDirectionLess()
            spinal.lib.master(bus.iBus.toWishbone()).setName("iBusWishbone")
          case bus: DBusCachedPlugin =>
            bus.dBus.setAsDirectionLess()
            spinal.lib.master(bus.dBus.toWishbone()).setName("dBusWishbone")
          case _ =>
        }
      }
      cpu
    }
  }
}

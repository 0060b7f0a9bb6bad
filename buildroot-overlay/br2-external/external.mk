include $(sort $(wildcard $(BR2_EXTERNAL_AESD_PATH)/package/*/*.mk))

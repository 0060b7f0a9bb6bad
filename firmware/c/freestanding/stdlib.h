/* freestanding stand-in: nothing from it is used */

"""Parallel sentences, the same meaning in Chinese and in English, on everyday topics
unrelated to any knowledge base: what `python -m core.knowledge.centering` embeds to find
the part of a vector that says "this is Chinese" or "this is English" rather than what it
means.

Why parallel: the difference between the two means is then the language alone, not a
difference of topics. Why unrelated topics: the means must not be fitted to the set the
recall is measured on (bench/knowledge_set.py).
"""

from __future__ import annotations

PAIRS: list[tuple[str, str]] = [
    (
        "今天早上下了一场大雨，路上很多人没有带伞。",
        "It rained heavily this morning and many people had no umbrella.",
    ),
    (
        "这家面馆的牛肉面很有名，中午总是排长队。",
        "This noodle shop is famous for its beef noodles; there is always a queue at noon.",
    ),
    (
        "我的电脑开机很慢，可能需要清理一下硬盘。",
        "My computer starts very slowly; the hard drive probably needs cleaning.",
    ),
    (
        "地铁二号线周末延长运营到凌晨一点。",
        "Metro line 2 runs until one in the morning at weekends.",
    ),
    (
        "医生建议每天至少走路三十分钟。",
        "The doctor recommends walking for at least thirty minutes a day.",
    ),
    (
        "这本小说讲的是一个渔民和大海的故事。",
        "This novel tells the story of a fisherman and the sea.",
    ),
    (
        "请把垃圾分成可回收和不可回收两类。",
        "Please sort the rubbish into recyclable and non-recyclable.",
    ),
    (
        "明天的航班因为大雾推迟了两个小时。",
        "Tomorrow's flight was delayed by two hours because of fog.",
    ),
    (
        "孩子们在公园里放风筝，玩得很开心。",
        "The children are flying kites in the park and having fun.",
    ),
    (
        "这台洗衣机有快洗模式，十五分钟就能洗完。",
        "This washing machine has a quick mode that finishes in fifteen minutes.",
    ),
    (
        "博物馆每周一闭馆，其他时间免费参观。",
        "The museum is closed on Mondays and free to visit at other times.",
    ),
    ("他每天早上六点起床去游泳。", "He gets up at six every morning to go swimming."),
    ("超市的鸡蛋今天打八折。", "Eggs are twenty percent off at the supermarket today."),
    (
        "手机屏幕摔碎了，换一块要三百块钱。",
        "The phone screen broke, and a new one costs three hundred yuan.",
    ),
    (
        "这座桥建于一百多年前，现在只允许行人通过。",
        "The bridge was built over a hundred years ago and is now open only to pedestrians.",
    ),
    (
        "老师让我们下周交一篇关于环保的作文。",
        "The teacher asked us to hand in an essay about the environment next week.",
    ),
    (
        "这条河的水很清，可以看到里面的小鱼。",
        "The river is so clear that you can see the small fish in it.",
    ),
    (
        "我想学做蛋糕，但是家里没有烤箱。",
        "I want to learn to bake cakes, but there is no oven at home.",
    ),
    ("音乐会的票已经卖完了。", "The concert tickets are sold out."),
    (
        "他把钥匙忘在办公室了，只好打电话给房东。",
        "He left his keys at the office and had to call the landlord.",
    ),
    (
        "冬天的时候，这里的湖面会结一层厚冰。",
        "In winter the lake here freezes over with thick ice.",
    ),
    (
        "新开的图书馆有一个专门给小朋友的阅读区。",
        "The new library has a reading area just for young children.",
    ),
    ("喝太多咖啡会让人晚上睡不着。", "Drinking too much coffee keeps people awake at night."),
    ("我们计划暑假开车去海边旅行。", "We plan to drive to the seaside in the summer holidays."),
    ("这款软件可以把语音自动转换成文字。", "This software converts speech to text automatically."),
    ("邻居家的狗每天晚上都会叫。", "The neighbour's dog barks every night."),
    (
        "银行的营业时间是上午九点到下午五点。",
        "The bank is open from nine in the morning to five in the afternoon.",
    ),
    (
        "他在比赛中跑了第一名，打破了学校纪录。",
        "He came first in the race and broke the school record.",
    ),
    (
        "这件外套太大了，我想换小一号的。",
        "This coat is too big; I would like to exchange it for a smaller size.",
    ),
    ("农民们正在田里收割小麦。", "The farmers are harvesting wheat in the fields."),
    (
        "电梯坏了，我们只能走楼梯上十楼。",
        "The lift is broken, so we have to take the stairs to the tenth floor.",
    ),
    ("奶奶每天下午都会在院子里浇花。", "Grandma waters the flowers in the yard every afternoon."),
    ("这个城市的房租最近涨了很多。", "Rents in this city have risen a lot recently."),
    ("考试前一天晚上要早点休息。", "Get some early rest the night before the exam."),
    ("火车站离这里大概有三公里。", "The railway station is about three kilometres from here."),
    ("她用旧衣服做了一个漂亮的包。", "She made a pretty bag out of old clothes."),
    ("天气预报说周末会有台风。", "The weather forecast says a typhoon is coming at the weekend."),
    (
        "这道菜要用小火慢慢炖两个小时。",
        "This dish has to simmer slowly over a low heat for two hours.",
    ),
    ("很多年轻人喜欢在网上买衣服。", "Many young people like to buy clothes online."),
    ("他的自行车被偷了，只好走路上班。", "His bicycle was stolen, so he has to walk to work."),
    (
        "山顶的风景非常美，可以看到整个城市。",
        "The view from the top of the mountain is beautiful; you can see the whole city.",
    ),
    ("这个药每天吃两次，饭后服用。", "Take this medicine twice a day after meals."),
    (
        "我们公司下个月要搬到新的办公楼。",
        "Our company is moving to a new office building next month.",
    ),
    ("小猫躲在沙发底下不肯出来。", "The kitten is hiding under the sofa and will not come out."),
    ("这家酒店的早餐包含在房费里。", "Breakfast at this hotel is included in the room rate."),
    (
        "他正在学习弹钢琴，已经练了三年。",
        "He is learning the piano and has practised for three years.",
    ),
    ("秋天的时候，树叶会变成红色和黄色。", "In autumn the leaves turn red and yellow."),
    (
        "请在会议开始前把手机调成静音。",
        "Please put your phone on silent before the meeting starts.",
    ),
]
